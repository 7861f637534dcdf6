package redisstore_test

import (
	"testing"
)

// BenchmarkFirstCost runs BenchmarkStoreRatio's first-execution comparison
// one operation at a time, each side alone: store (Claim then Complete of
// a new key, two EVALSHA) and raw (SET NX then HSET of the same outcome),
// so that the Go side's cost per first execution can be read with
// callgrind (the difference of two -test.benchtime Nx runs over the
// difference of N, under GOGC=off GODEBUG=asyncpreemptoff=1 -test.cpu 1)
// and its allocations with -benchmem.
//
//	go test -run '^$' -bench BenchmarkFirstCost -benchtime 4000x -benchmem ./idempotency/redisstore/
func BenchmarkFirstCost(b *testing.B) {
	for _, side := range []string{"store", "raw"} {
		b.Run(side, func(b *testing.B) {
			s, rdb, prefix := ratioStore(b, 1)
			variant, anchor := firstOps(b, s, rdb, prefix, 1)
			op := variant
			if side == "raw" {
				op = anchor
			}
			op(100) // warm up: the pool's connection, the store's boxed lease and ttl
			b.ResetTimer()
			op(b.N)
		})
	}
}
