// Package redisledger keeps a mockserver.Ledger in Redis, so that every
// cmd/mockserver process over one Redis answers from the same payments and
// balances, and a payment made by a process that died is not lost. Most
// callers want:
//
//	srv := mockserver.New(
//		mockserver.WithStore(redisstore.New(rdb)),
//		mockserver.WithLedger(redisledger.New(rdb, "saferetry:mock:ns:", nil)),
//	)
//
// # Data layout
//
// A ledger is four keys, named after its prefix P:
//
//	P{Pledger}:refs      hash: ref -> the payment JSON the ref names
//	P{Pledger}:payments  list: payment JSON, oldest first
//	P{Pledger}:ids       hash: payment ID -> payment JSON
//	P{Pledger}:balances  hash: currency -> balance, decimal
//
// The hash tag {Pledger} puts the four keys in one Redis Cluster slot, as
// the Lua script that writes them requires, while ledgers with different
// prefixes spread over the slots. It is never empty ("ledger" is part of
// it), so the empty prefix works too. A prefix must not contain '{' or '}':
// either would move or cut the tag (Redis hashes the text between the first
// '{' and the next '}'); New panics on one and ValidatePrefix tells in
// advance. The names cannot clash with a redisstore.Store's under the same
// prefix, whose entries all start with P{}.
//
// A currency's balance is stored from its first payment on; until then it
// is the opening balance given to New, so processes must agree on the
// opening balances.
//
// # Atomicity and durability
//
// Pay is one Lua script, one round trip (EVALSHA, falling back to EVAL once
// after the server's script cache was flushed, for example by a restart):
// it finds the payment under the ref (if created less than the keep of
// mockserver.Ledger.Pay before the new one: the script compares the
// Created times, so no key expiry and no Redis clock is involved), or
// checks the balance, debits it and records the payment, which the ref
// names from then on, with nothing in between, so that two processes
// paying under the same ref at once make one payment. It reads everything
// it needs before its first write, so it fails, if at all, before writing;
// Redis runs a script to the end and writes it to the AOF and the replicas
// as one transaction, so a crash leaves either the whole payment or none.
//
// A payment survives a Redis crash only once it is on disk: run Redis with
// appendonly yes and appendfsync always when a chaos test counts payments
// across Redis restarts (everysec can lose the last second's writes). A
// failover to an asynchronous replica can lose acknowledged payments too.
//
// go-redis may resend a script whose reply was lost (Options.MaxRetries);
// a resent Pay whose first send was applied finds the payment it made and
// reports it found, which is safe: nothing is paid twice.
package redisledger
