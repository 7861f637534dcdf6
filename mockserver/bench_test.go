package mockserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/loadgen"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// BenchmarkEndToEnd serves POST /payments with a fresh key per request
// from 32 closed-loop clients over loopback, alternately through the mock
// server and through a trivial JSON server (the raw anchor: it reads the
// body and answers 201 with a payment-shaped body), and reports the median
// ratio of their requests per second ("ratio") and of their p99 latencies
// ("p99-ratio"). Each b.N is one round of both, 500 ms each. The
// -ceiling rows put the store's share apart: the trivial server behind the
// middleware over memory, or making the two Redis calls of a first
// execution, against the trivial server; the -vs-ceiling rows the mock
// server against that ceiling:
//
//	go test -run '^$' -bench EndToEnd -benchtime 7x ./mockserver/
func BenchmarkEndToEnd(b *testing.B) {
	trivial := httptest.NewServer(http.HandlerFunc(loadgen.PaymentAnchor))
	defer trivial.Close()

	b.Run("memory", func(b *testing.B) {
		srv := mockserver.New(mockserver.WithBalance("EUR", 1<<62))
		defer srv.Close()
		compare(b, trivial.URL, srv.URL)
	})
	// The middleware's ceiling over memory: the trivial server behind
	// idempotency.Middleware over a memstore, the least any server that
	// keeps its keys in memory through the middleware does per request.
	// "memory-ceiling" is it against the trivial server; "memory-vs-ceiling"
	// the mock server over memory against it.
	memCeiling := func() (*httptest.Server, func()) {
		store := memstore.New()
		srv := httptest.NewServer(idempotency.Middleware(store)(http.HandlerFunc(loadgen.PaymentAnchor)))
		return srv, func() { srv.Close(); _ = store.Close() }
	}
	b.Run("memory-ceiling", func(b *testing.B) {
		srv, closeSrv := memCeiling()
		defer closeSrv()
		compare(b, trivial.URL, srv.URL)
	})
	b.Run("memory-vs-ceiling", func(b *testing.B) {
		limit, closeLimit := memCeiling()
		defer closeLimit()
		srv := mockserver.New(mockserver.WithBalance("EUR", 1<<62))
		defer srv.Close()
		compare(b, limit.URL, srv.URL)
	})
	b.Run("redis", func(b *testing.B) {
		rdb := redisClient(b)
		prefix := testenv.RedisPrefix(b, rdb, "saferetry-mockserver-bench:")
		srv := mockserver.New(mockserver.WithBalance("EUR", 1<<62),
			mockserver.WithStore(redisstore.New(rdb, redisstore.WithPrefix(prefix))))
		defer srv.Close()
		compare(b, trivial.URL, srv.URL)
	})
	// The store's ceiling: the trivial server making the two redisstore
	// calls of a first execution (Claim, Complete) before it answers, the
	// least any server over this store does per request. "redis-ceiling"
	// is it against the trivial server; "redis-vs-ceiling" the mock server
	// over Redis against it.
	ceiling := func(b *testing.B) (*httptest.Server, string) {
		rdb := redisClient(b)
		prefix := testenv.RedisPrefix(b, rdb, "saferetry-mockserver-bench:")
		store := redisstore.New(rdb, redisstore.WithPrefix(prefix))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := idempotency.Key{Scope: "ceiling", Key: r.Header.Get("Idempotency-Key")}
			res, err := store.Claim(r.Context(), k, "v1:ceiling", time.Minute, time.Hour)
			if err == nil && res.Acquired {
				err = store.Complete(r.Context(), k, res.Token, ceilingResponse, time.Hour)
			}
			if err != nil || !res.Acquired {
				http.Error(w, "store", http.StatusServiceUnavailable)
				return
			}
			trivial.Config.Handler.ServeHTTP(w, r)
		}))
		return srv, prefix
	}
	b.Run("redis-ceiling", func(b *testing.B) {
		srv, _ := ceiling(b)
		defer srv.Close()
		compare(b, trivial.URL, srv.URL)
	})
	b.Run("redis-vs-ceiling", func(b *testing.B) {
		limit, prefix := ceiling(b)
		defer limit.Close()
		srv := mockserver.New(mockserver.WithBalance("EUR", 1<<62),
			mockserver.WithStore(redisstore.New(redisClient(b), redisstore.WithPrefix(prefix+"mock:"))))
		defer srv.Close()
		compare(b, limit.URL, srv.URL)
	})
}

// ceilingResponse is what the ceiling server stores per request: the
// size of the mock server's answer to a payment.
var ceilingResponse = idempotency.Response{Status: http.StatusCreated,
	Header: http.Header{"Content-Type": {"application/json"}},
	Body:   []byte(`{"id":"pay_0123456789abcdef","amount":1,"currency":"EUR","recipient":"acct_1","status":"succeeded","idempotency_key":"00000000-0000-4000-8000-000000000000"}`)}

// compare runs b.N alternating rounds of the anchor and the target and
// reports their ratios and figures.
func compare(b *testing.B, anchorURL, targetURL string) {
	const workers = 32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	pay := func(name, url string) loadgen.Target {
		return loadgen.Target{Name: name, Request: func(w, i int) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPost, url+"/payments",
				strings.NewReader(`{"amount":1,"currency":"EUR","recipient":"acct_`+strconv.Itoa(w)+`"}`))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", uuid.NewString())
			}
			return req, err
		}, OK: func(r *http.Response) bool { return r.StatusCode == http.StatusCreated }}
	}
	b.ResetTimer()
	c, err := loadgen.Compare(context.Background(), client, pay("trivial", anchorURL), pay("mockserver", targetURL),
		workers, b.N, 500*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(c.Ratio, "ratio")
	b.ReportMetric(c.P99Ratio, "p99-ratio")
	b.ReportMetric(c.Target.RPS(), "req/s")
	b.ReportMetric(c.Anchor.RPS(), "anchor-req/s")
	b.ReportMetric(float64(c.Target.P99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(c.Anchor.P99.Microseconds()), "anchor-p99-µs")
	b.ReportMetric(0, "ns/op")
}
