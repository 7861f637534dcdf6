package idempotency_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzhttp"

	"github.com/saferetry/saferetry/idempotency"
)

// bigJSON answers 201 with a JSON document naming its execution, larger
// than gzhttp's minimum size so that gzhttp compresses it.
type bigJSON struct{ calls atomic.Int64 }

func (b *bigJSON) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"execution":%d,"padding":%q}`, n, strings.Repeat("payment ", 512))
}

// rawResponse is one response as it came off the wire, body not decoded.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// postRaw sends a protected POST with the given Accept-Encoding ("" sends
// none) through a transport that does not decode, so the body is what the
// server sent.
func postRaw(t *testing.T, url, key, acceptEncoding string) rawResponse {
	t.Helper()
	resp, body := postOver(t, &http.Transport{DisableCompression: true}, url, key, acceptEncoding)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: body}
}

// postDecoded sends a protected POST through net/http's default transport
// behaviour (it asks for gzip and decodes) and returns the decoded JSON
// document and whether the transport decoded it.
func postDecoded(t *testing.T, url, key string) (doc map[string]any, replayed, uncompressed bool) {
	t.Helper()
	resp, body := postOver(t, &http.Transport{}, url, key, "")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("body does not decode as JSON (Content-Encoding %q, %d bytes): %v",
			resp.Header.Get("Content-Encoding"), len(body), err)
	}
	return doc, resp.Header.Get(idempotency.HeaderReplayed) == "true", resp.Uncompressed
}

// postDecodedTwice sends the same protected POST twice through
// postDecoded and returns both documents; it fails unless the transport
// decoded both, and only the second is a replay.
func postDecodedTwice(t *testing.T, url, key string) (first, again map[string]any) {
	t.Helper()
	first, replayed, unz := postDecoded(t, url, key)
	if replayed || !unz {
		t.Fatalf("first answer: replayed %v, decoded by the transport %v; want false, true", replayed, unz)
	}
	again, replayed, unz = postDecoded(t, url, key)
	if !replayed || !unz {
		t.Fatalf("gzip replay: replayed %v, decoded by the transport %v; want true, true", replayed, unz)
	}
	return first, again
}

// postOver POSTs {"amount":1} under key to url through tr, with the given
// Accept-Encoding ("" sets none), and returns the response with its body
// read and closed.
func postOver(t *testing.T, tr *http.Transport, url, key, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, key)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	c := &http.Client{Transport: tr}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("bad gzip: %v", err)
	}
	return out
}

// checkContentLength fails unless r's Content-Length, when sent, is the
// length of the bytes that came with it.
func checkContentLength(t *testing.T, what string, r rawResponse) {
	t.Helper()
	if cl := r.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(r.body)) {
		t.Errorf("%s: Content-Length %s, body %d bytes", what, cl, len(r.body))
	}
}

// Compression inside the Middleware: the encoded body is stored with its
// Content-Encoding and Vary, so the replay is the first answer byte for
// byte, correctly labelled, and decodes to the same document.
func TestCompressionInsideReplaysEncodedBody(t *testing.T) {
	store := newStore(t)
	app := &bigJSON{}
	srv := httptest.NewServer(idempotency.Middleware(store)(gzhttp.GzipHandler(app)))
	defer srv.Close()

	t.Run("decoded by a gzip-accepting client", func(t *testing.T) {
		first, again := postDecodedTwice(t, srv.URL, "k-decoded")
		if first["execution"] != again["execution"] || first["padding"] != again["padding"] {
			t.Errorf("replay decodes to execution %v, first answer to %v", again["execution"], first["execution"])
		}
	})

	t.Run("raw bytes and headers", func(t *testing.T) {
		first := postRaw(t, srv.URL, "k-raw", "gzip")
		if got := first.header.Get("Content-Encoding"); got != "gzip" {
			t.Fatalf("first answer Content-Encoding %q, want gzip (is the body over gzhttp's minimum?)", got)
		}
		again := postRaw(t, srv.URL, "k-raw", "gzip")
		if again.header.Get(idempotency.HeaderReplayed) != "true" {
			t.Fatal("second answer is not a replay")
		}
		if again.status != first.status || !bytes.Equal(again.body, first.body) {
			t.Errorf("replay %d with %d bytes, first answer %d with %d bytes; want the same bytes",
				again.status, len(again.body), first.status, len(first.body))
		}
		for _, h := range []string{"Content-Encoding", "Vary", "Content-Type"} {
			if g, w := again.header.Values(h), first.header.Values(h); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("replay %s %q, first answer %q", h, g, w)
			}
		}
		checkContentLength(t, "first answer", first)
		checkContentLength(t, "replay", again)
		gunzip(t, again.body)
	})

	// The retry's Accept-Encoding is not part of the fingerprint, and the
	// outcome is one answer: a retry that does not accept gzip still gets
	// the stored gzip bytes, labelled so (with their Vary).
	t.Run("retry with another Accept-Encoding gets the stored encoding", func(t *testing.T) {
		first := postRaw(t, srv.URL, "k-switch", "gzip")
		again := postRaw(t, srv.URL, "k-switch", "identity")
		if again.header.Get(idempotency.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
			t.Fatalf("replay (replayed %q) is not the first answer's bytes", again.header.Get(idempotency.HeaderReplayed))
		}
		if again.header.Get("Content-Encoding") != "gzip" || again.header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("replay Content-Encoding %q, Vary %q; want gzip, Accept-Encoding",
				again.header.Get("Content-Encoding"), again.header.Get("Vary"))
		}
	})

	t.Run("first answer not encoded: replay not encoded", func(t *testing.T) {
		first := postRaw(t, srv.URL, "k-plain", "identity")
		if first.header.Get("Content-Encoding") != "" {
			t.Fatalf("first answer Content-Encoding %q, want none", first.header.Get("Content-Encoding"))
		}
		again := postRaw(t, srv.URL, "k-plain", "gzip")
		if again.header.Get(idempotency.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
			t.Fatal("replay is not the first answer's bytes")
		}
		if ce, v := again.header.Get("Content-Encoding"), again.header.Get("Vary"); ce != "" || v != "" {
			t.Errorf("replay of a plain answer: Content-Encoding %q, Vary %q; want neither", ce, v)
		}
		checkContentLength(t, "replay", again)
	})

	if n := app.calls.Load(); n != 4 {
		t.Errorf("handler ran %d times for 4 keys", n)
	}
}

// Compression outside the Middleware: the plain answer is stored, and each
// answer, first or replay, is compressed for the request it goes to.
func TestCompressionOutsideCompressesPerRequest(t *testing.T) {
	store := newStore(t)
	app := &bigJSON{}
	srv := httptest.NewServer(gzhttp.GzipHandler(idempotency.Middleware(store)(app)))
	defer srv.Close()

	first, again := postDecodedTwice(t, srv.URL, "k-out")
	if first["execution"] != again["execution"] {
		t.Errorf("replay decodes to execution %v, first answer to %v", again["execution"], first["execution"])
	}

	plain := postRaw(t, srv.URL, "k-out", "identity")
	if plain.header.Get(idempotency.HeaderReplayed) != "true" || plain.header.Get("Content-Encoding") != "" {
		t.Fatalf("identity replay: replayed %q, Content-Encoding %q; want true, none",
			plain.header.Get(idempotency.HeaderReplayed), plain.header.Get("Content-Encoding"))
	}
	zipped := postRaw(t, srv.URL, "k-out", "gzip")
	if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, zipped.body), plain.body) {
		t.Errorf("gzip replay (Content-Encoding %q) does not decode to the identity replay", zipped.header.Get("Content-Encoding"))
	}
	checkContentLength(t, "identity replay", plain)
	checkContentLength(t, "gzip replay", zipped)

	e, found, err := store.Get(context.Background(), idempotency.Key{Key: "k-out"})
	if err != nil || !found || e.Response == nil {
		t.Fatalf("stored entry: found %v, err %v", found, err)
	}
	if ce := e.Response.Header.Get("Content-Encoding"); ce != "" || !bytes.Equal(e.Response.Body, plain.body) {
		t.Errorf("stored answer Content-Encoding %q, %d bytes; want the plain %d bytes", ce, len(e.Response.Body), len(plain.body))
	}
	if n := app.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
