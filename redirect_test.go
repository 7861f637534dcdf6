package saferetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestCrossOriginRedirectKeepsBodyAndKeyHome: a 307 or 308 to another
// origin would resend the body and the key there; it is not followed, and
// the error says why. A port or scheme of its own is another origin too.
func TestCrossOriginRedirectKeepsBodyAndKeyHome(t *testing.T) {
	for _, loc := range []string{"http://elsewhere.test/v2/debits", "http://api.test:8080/v2/debits", "https://api.test/v2/debits"} {
		for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			rc := testkit.NewRecorder(testkit.StatusH(code, "Location", loc), testkit.Status(201))
			_, err := testClient(rc).Do(newReq(t, context.Background(), http.MethodPost, "card 4242"))
			var e *Error
			if !errors.Is(err, ErrCrossOriginRedirect) || !errors.Is(err, ErrNotSent) || !errors.As(err, &e) {
				t.Fatalf("%d to %s: err = %v, want ErrCrossOriginRedirect (ErrNotSent)", code, loc, err)
			}
			if s := rc.Seen(); len(s) != 1 || e.Key != s[0].Keys[0] {
				t.Fatalf("%d to %s: round trips %+v, error key %q; want only the first, and its key in the error", code, loc, s, e.Key)
			}
		}
	}
}

// TestCrossOriginRedirectOfAnEmptyPost: a keyed method goes elsewhere
// neither with its key nor without it, even with no body to carry.
func TestCrossOriginRedirectOfAnEmptyPost(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusTemporaryRedirect, "Location", "http://elsewhere.test/v2/debits"), testkit.Status(201))
	_, err := testClient(rc).Do(newReq(t, context.Background(), http.MethodPost, ""))
	if !errors.Is(err, ErrCrossOriginRedirect) {
		t.Fatalf("err = %v, want ErrCrossOriginRedirect", err)
	}
	if s := rc.Seen(); len(s) != 1 {
		t.Fatalf("round trips %+v, want only the first", s)
	}
}

// TestSameOriginRedirectKeepsBodyAndKey: the default port spelt out, or a
// host in capitals, is the same origin: the key and body follow.
func TestSameOriginRedirectKeepsBodyAndKey(t *testing.T) {
	for _, loc := range []string{"/v2/debits", "http://API.test:80/v2/debits"} {
		rc := testkit.NewRecorder(testkit.StatusH(http.StatusTemporaryRedirect, "Location", loc), testkit.Status(201))
		resp, err := testClient(rc).Do(newReq(t, context.Background(), http.MethodPost, "card 4242"))
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		resp.Body.Close()
		s := rc.Seen()
		if len(s) != 2 || len(s[1].Keys) != 1 || s[1].Keys[0] != s[0].Keys[0] || s[1].Body != "card 4242" {
			t.Fatalf("%s: round trips %+v, want the key and body on both", loc, s)
		}
	}
}

// TestCrossOriginRedirectsAllowed: WithCrossOriginRedirects(true) lets the
// key and body follow.
func TestCrossOriginRedirectsAllowed(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusPermanentRedirect, "Location", "http://elsewhere.test/v2/debits"), testkit.Status(201))
	resp, err := testClient(rc, WithCrossOriginRedirects(true)).Do(newReq(t, context.Background(), http.MethodPost, "card 4242"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := rc.Seen()
	if len(s) != 2 || len(s[1].Keys) != 1 || s[1].Keys[0] != s[0].Keys[0] || s[1].Body != "card 4242" {
		t.Fatalf("round trips %+v, want the key and body followed", s)
	}
}

// TestCrossOriginRedirectWithoutBodyDropsTheKey: a 303 turns the POST into
// a GET; to another origin it goes without the key, whether the key came
// from WithKey or from the caller's header.
func TestCrossOriginRedirectWithoutBodyDropsTheKey(t *testing.T) {
	for _, fromHeader := range []bool{false, true} {
		rc := testkit.NewRecorder(testkit.StatusH(http.StatusSeeOther, "Location", "http://cdn.test/receipts/7"), testkit.Status(200))
		req := newReq(t, WithKey(context.Background(), "debit-7"), http.MethodPost, "x")
		if fromHeader {
			req = newReq(t, context.Background(), http.MethodPost, "x")
			req.Header.Set(HeaderIdempotencyKey, "debit-7")
		}
		resp, err := testClient(rc).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := rc.Seen()
		if len(s) != 2 || len(s[0].Keys) != 1 || s[1].Method != http.MethodGet || len(s[1].Keys) != 0 {
			t.Fatalf("header %v: round trips %+v, want the GET to the other origin without a key", fromHeader, s)
		}
		if got := req.Header.Get(HeaderIdempotencyKey); fromHeader && got != "debit-7" {
			t.Fatalf("the caller's header was modified: %q", got)
		}
	}
}

// TestRedirectOfABodyWithoutGetBody: Client.Do buffers a body without
// GetBody to make it replayable, and a 307 or 308 hop replays it: the
// redirect is followed with the body and the key, as for a body with
// GetBody, rather than the 307 being returned as the answer to an
// operation that never ran. A body over the buffer limit cannot be
// replayed: the 307 comes back as it is.
func TestRedirectOfABodyWithoutGetBody(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		rc := testkit.NewRecorder(testkit.StatusH(code, "Location", "/v2/debits"), testkit.Status(201))
		req := newReq(t, context.Background(), http.MethodPost, "card 4242")
		req.GetBody = nil
		resp, err := testClient(rc).Do(req)
		if err != nil {
			t.Fatalf("%d: %v", code, err)
		}
		resp.Body.Close()
		s := rc.Seen()
		if resp.StatusCode != http.StatusCreated || len(s) != 2 || len(s[1].Keys) != 1 || s[1].Keys[0] != s[0].Keys[0] || s[1].Body != "card 4242" {
			t.Errorf("%d: got %d after round trips %+v; want the 201 of the second hop, with the key and body on both", code, resp.StatusCode, s)
		}
		if req.GetBody != nil {
			t.Errorf("%d: the caller's request got a GetBody", code)
		}
	}
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusTemporaryRedirect, "Location", "/v2/debits"), testkit.Status(201))
	req := newReq(t, context.Background(), http.MethodPost, "card 4242")
	req.GetBody = nil
	resp, err := testClient(rc, WithMaxBufferedBody(4)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := rc.Seen(); resp.StatusCode != http.StatusTemporaryRedirect || len(s) != 1 || s[0].Body != "card 4242" {
		t.Errorf("over the buffer limit: got %d after round trips %+v; want the 307, the body sent once", resp.StatusCode, s)
	}
}

// TestClientBodyWithoutGetBodyKeepsTheTransportsRules: under Client.Do, a
// body without GetBody is replayed on a retry when it fits the buffer, sent
// once when it does not, and one whose reading fails is closed and not
// sent, with the key in the ErrNotSent: as through the Transport alone.
func TestClientBodyWithoutGetBodyKeepsTheTransportsRules(t *testing.T) {
	for _, tc := range []struct {
		limit    int64
		attempts int
	}{{1 << 10, 2}, {4, 1}} {
		rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
		pb := &plainBody{r: strings.NewReader("card 4242")}
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", pb)
		resp, err := testClient(rc, WithMaxBufferedBody(tc.limit)).Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		s := rc.Seen()
		if len(s) != tc.attempts || s[len(s)-1].Body != "card 4242" || !pb.closed.Load() {
			t.Errorf("limit %d: %v, %v after round trips %+v (closed %v); want %d attempts with the body, the body closed", tc.limit, resp, err, s, pb.closed.Load(), tc.attempts)
		}
	}
	rc := testkit.NewRecorder(testkit.Status(201))
	pb := &plainBody{err: errors.New("disk on fire")}
	req, _ := http.NewRequestWithContext(WithKey(context.Background(), "k-1"), http.MethodPost, "http://api.test/v1/debits", pb)
	_, err := testClient(rc).Do(req)
	var e *Error
	if !errors.Is(err, ErrNotSent) || !errors.As(err, &e) || e.Key != "k-1" || !strings.Contains(err.Error(), "disk on fire") || !pb.closed.Load() || len(rc.Seen()) != 0 {
		t.Errorf("a body that fails: %v (closed %v, round trips %d); want ErrNotSent with key k-1 and the read error, the body closed, nothing sent", err, pb.closed.Load(), len(rc.Seen()))
	}
}
