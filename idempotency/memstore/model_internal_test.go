package memstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// modelEntry is what the model expects the store to hold for a key.
type modelEntry struct {
	state             idempotency.State
	fp                string
	token             int64
	leaseUntil, until time.Duration // from the start of the run
	resp              *idempotency.Response
}

// TestBoundsAgainstModel runs random sequences of claims, takeovers,
// renewals, completions (some too large for the room left), releases, gets,
// replays, sweeps and clock moves against a small bounded store and a model
// of what it must hold. A live entry (in progress, or completed within its
// ttl) is never forgotten nor taken by a new claim; ErrFull and
// ErrResponseNotStorable come only when the store, swept of everything
// expired, really has no room; the counts match what the shards hold after
// every step and return exactly to zero once everything expired.
func TestBoundsAgainstModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed*7919+1))
	maxEntries := 3 + rng.IntN(10)
	maxBytes := int64(1500 + rng.IntN(4000))
	s, clk := newFake(t, WithMaxEntries(maxEntries), WithMaxBytes(maxBytes))
	start := clk.Now()
	now := func() time.Duration { return clk.Now().Sub(start) }

	keys := make([]idempotency.Key, 16)
	for i := range keys {
		keys[i] = idempotency.Key{Scope: "s" + strconv.Itoa(i%3), Key: "key-" + strconv.Itoa(i)}
	}
	model := map[idempotency.Key]*modelEntry{}
	tokens := map[idempotency.Key][]int64{}
	live := func(k idempotency.Key) *modelEntry {
		m := model[k]
		if m != nil && now() >= m.until {
			delete(model, k)
			return nil
		}
		return m
	}
	anyExpired := func() bool {
		for _, m := range model {
			if now() >= m.until {
				return true
			}
		}
		return false
	}
	dur := func() time.Duration {
		return []time.Duration{time.Nanosecond, time.Millisecond, time.Second, 5 * time.Second, time.Minute}[rng.IntN(5)]
	}
	resp := func() idempotency.Response {
		switch rng.IntN(4) {
		case 0:
			return idempotency.Response{Status: 201, Oversize: true}
		case 1:
			return idempotency.Response{Status: 200, Body: bytes.Repeat([]byte("b"), rng.IntN(3000))}
		case 2:
			h := http.Header{"Content-Type": {"application/json"}, "Etag": nil, "X-Empty": {}}
			for i := range rng.IntN(20) {
				h["X-Many-"+strconv.Itoa(i)] = []string{"a", "bb", ""}
			}
			return idempotency.Response{Status: 202, Header: h, Body: []byte{}}
		}
		return idempotency.Response{Status: 204}
	}
	wantEntry := func(step int, got idempotency.Entry, m *modelEntry) {
		t.Helper()
		if got.State != m.state || got.Fingerprint != m.fp || got.Token != m.token {
			t.Fatalf("step %d: entry %v/%q/%d, model %v/%q/%d", step, got.State, got.Fingerprint, got.Token, m.state, m.fp, m.token)
		}
		if m.state == idempotency.StateInProgress && got.LeaseRemaining != m.leaseUntil-now() {
			t.Fatalf("step %d: lease remaining %v, model %v", step, got.LeaseRemaining, m.leaseUntil-now())
		}
		if m.state == idempotency.StateCompleted && !reflect.DeepEqual(got.Response, m.resp) {
			t.Fatalf("step %d: response %+v, model %+v", step, got.Response, m.resp)
		}
	}

	var fulls, notStorable, takeovers, replays int
	defer func() {
		t.Logf("ErrFull %d, not storable %d, takeovers %d, replays %d", fulls, notStorable, takeovers, replays)
	}()
	for step := range 3000 {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(20); {
		case op < 6: // Claim
			fp := "fp" + strconv.Itoa(rng.IntN(2))
			lease, ttl := dur(), dur()
			m := live(k)
			r, err := s.Claim(ctx, k, fp, lease, ttl)
			takeover := m != nil && m.fp == fp && m.state == idempotency.StateInProgress && now() >= m.leaseUntil
			switch {
			case errors.Is(err, ErrFull):
				fulls++
				if m != nil && !takeover {
					t.Fatalf("step %d: ErrFull for a key with a live entry", step)
				}
				if anyExpired() {
					t.Fatalf("step %d: ErrFull while expired entries remained unswept", step)
				}
				e, b := s.usage()
				need := claimSize(k, fp)
				if takeover {
					need = itemSize(k)
				}
				if !takeover && e < int64(maxEntries) && b+need <= maxBytes || takeover && b+need <= maxBytes {
					t.Fatalf("step %d: ErrFull with %d of %d entries, %d of %d bytes, %d needed", step, e, maxEntries, b, maxBytes, need)
				}
				// The model's expired entries are gone from the store too.
				for kk, mm := range model {
					if now() >= mm.until {
						delete(model, kk)
					}
				}
			case err != nil:
				t.Fatalf("step %d: Claim: %v", step, err)
			case m == nil:
				if !r.Acquired || r.TookOver {
					t.Fatalf("step %d: Claim of an absent key = %+v", step, r)
				}
				model[k] = &modelEntry{state: idempotency.StateInProgress, fp: fp, token: r.Token, leaseUntil: now() + lease, until: now() + ttl}
				tokens[k] = append(tokens[k], r.Token)
			case takeover:
				if !r.Acquired || !r.TookOver || r.Token <= m.token {
					t.Fatalf("step %d: takeover = %+v", step, r)
				}
				m.token, m.leaseUntil, m.until = r.Token, now()+lease, now()+ttl
				takeovers++
				tokens[k] = append(tokens[k], r.Token)
			default:
				if r.Acquired {
					t.Fatalf("step %d: Claim acquired %v, which holds a live entry %+v: a second execution", step, k, *m)
				}
				wantEntry(step, r.Entry, m)
				replays++
			}
		case op < 9: // Complete
			ts := tokens[k]
			if len(ts) == 0 {
				continue
			}
			token := ts[rng.IntN(len(ts))]
			if rng.IntN(2) == 0 {
				token = ts[len(ts)-1]
			}
			m := live(k)
			held := m != nil && m.state == idempotency.StateInProgress && m.token == token
			rs, ttl := resp(), dur()
			_, before := s.usage()
			err := s.Complete(ctx, k, token, rs, ttl)
			switch {
			case !held:
				if !errors.Is(err, idempotency.ErrStaleToken) {
					t.Fatalf("step %d: Complete with a stale token = %v", step, err)
				}
			case errors.Is(err, idempotency.ErrResponseNotStorable):
				notStorable++
				if rs.Oversize && rs.Header == nil && rs.Body == nil {
					t.Fatalf("step %d: the not-replayable marker did not fit: %v", step, err)
				}
				if anyExpired() {
					t.Fatalf("step %d: ErrResponseNotStorable while expired entries remained unswept", step)
				}
				_, after := s.usage()
				if after > before {
					t.Fatalf("step %d: a refused Complete took %d bytes", step, after-before)
				}
				grow := newResponse(&rs).size() - reserveSize(k)
				if now()+ttl < m.until {
					grow += itemSize(k) // the store's queued time may be earlier; this is a lower bound
				}
				if after+grow <= maxBytes && len(rs.Body) <= maxBodyLen {
					t.Fatalf("step %d: ErrResponseNotStorable with %d of %d bytes in use and %d needed", step, after, maxBytes, grow)
				}
				for kk, mm := range model {
					if now() >= mm.until {
						delete(model, kk)
					}
				}
			case err != nil:
				t.Fatalf("step %d: Complete: %v", step, err)
			default:
				m.state, m.until, m.leaseUntil = idempotency.StateCompleted, now()+ttl, 0
				c := rs
				c.Header = rs.Header.Clone()
				if rs.Body != nil {
					c.Body = bytes.Clone(rs.Body)
				}
				m.resp = &c
			}
		case op < 11: // Release
			ts := tokens[k]
			if len(ts) == 0 {
				continue
			}
			token := ts[len(ts)-1]
			m := live(k)
			held := m != nil && m.state == idempotency.StateInProgress && m.token == token
			err := s.Release(ctx, k, token)
			if held != (err == nil) || !held && !errors.Is(err, idempotency.ErrStaleToken) {
				t.Fatalf("step %d: Release (held %v) = %v", step, held, err)
			}
			if held {
				delete(model, k)
			}
		case op < 12: // Renew
			ts := tokens[k]
			if len(ts) == 0 {
				continue
			}
			token, lease := ts[len(ts)-1], dur()
			m := live(k)
			held := m != nil && m.state == idempotency.StateInProgress && m.token == token
			err := s.Renew(ctx, k, token, lease)
			if held != (err == nil) {
				t.Fatalf("step %d: Renew (held %v) = %v", step, held, err)
			}
			if held {
				m.leaseUntil = now() + lease
				m.until = max(m.until, m.leaseUntil)
			}
		case op < 14: // Get
			m := live(k)
			e, found, err := s.Get(ctx, k)
			if err != nil || found != (m != nil) {
				t.Fatalf("step %d: Get = %v, %v; model %v", step, found, err, m != nil)
			}
			if found {
				wantEntry(step, e, m)
			}
		case op < 17: // time
			clk.Advance([]time.Duration{time.Nanosecond, 100 * time.Millisecond, time.Second, 3 * time.Second, 20 * time.Second}[rng.IntN(5)])
		case op < 18:
			s.sweep(clk.Now())
			for kk := range model {
				live(kk)
			}
		default: // one batch of one shard
			s.shards[rng.IntN(shardCount)].sweepExpired(clk.Now(), 1+rng.IntN(3))
		}
		checkBudget(t, s)
		if e, b := s.usage(); e < 0 || b < 0 || e > int64(maxEntries) || b > maxBytes {
			t.Fatalf("step %d: usage %d entries, %d bytes; bounds %d, %d", step, e, b, maxEntries, maxBytes)
		}
		for kk := range model {
			if live(kk) != nil && s.shardFor(kk).m[kk] == nil {
				t.Fatalf("step %d: the store forgot live entry %v", step, kk)
			}
		}
	}
	clk.Advance(time.Hour)
	s.sweep(clk.Now())
	if e, b := s.usage(); e != 0 || b != 0 {
		t.Fatalf("after everything expired and was swept: %d entries and %d bytes in use, want 0 and 0", e, b)
	}
	checkBudget(t, s)
}
