package testkit

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// loopRT answers 201 to every request, counting the benchmark's POSTs,
// any other request, and the response bodies not yet closed.
type loopRT struct{ posts, other, open int }

func (l *loopRT) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost && r.URL.String() == "http://api.test/v1/debits" && bytes.Equal(body, BenchPayload) {
		l.posts++
	} else {
		l.other++
	}
	l.open++
	return &http.Response{StatusCode: 201, Body: countedBody{&l.open}}, nil
}

// countedBody is an empty body whose Close counts down open.
type countedBody struct{ open *int }

func (countedBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b countedBody) Close() error           { *b.open--; return nil }

// TestBenchPOST: the loop sends BenchPayload as a POST to api.test and
// closes every response body it gets.
func TestBenchPOST(t *testing.T) {
	l := &loopRT{}
	r := testing.Benchmark(func(b *testing.B) { BenchPOST(b, l) })
	if r.N == 0 || l.posts == 0 || l.other != 0 || l.open != 0 {
		t.Fatalf("%d iterations: %d benchmark POSTs, %d other requests, %d bodies left open", r.N, l.posts, l.other, l.open)
	}
}
