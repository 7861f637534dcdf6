package contract

import (
	"net/http"
	"testing"
)

// TestStatusTablesAgree holds the client's and the server's status rules
// to each other for every status from 100 to 599 (see the comment above
// Retried).
func TestStatusTablesAgree(t *testing.T) {
	replayed := http.Header{HeaderReplayed: {"true"}}
	for s := 100; s <= 599; s++ {
		if Stored(s) && Retried(s, replayed) {
			t.Errorf("%d: the server stores it, but the client retries its replay", s)
		}
		followed := s == http.StatusTemporaryRedirect || s == http.StatusPermanentRedirect
		if s >= 200 && !Stored(s) && !Retried(s, nil) && s != http.StatusNotImplemented && !followed {
			t.Errorf("%d: the server does not store it, so a retry must run the operation, but the client does not retry", s)
		}
		if Stored(s) && Retried(s, nil) && s != http.StatusConflict {
			t.Errorf("%d: retried and storable; only 409 (in progress, never stored) may be", s)
		}
	}
}

func TestRetriedAndStored(t *testing.T) {
	retried := map[int]bool{408: true, 409: true, 429: true, 500: true, 502: true, 503: true, 504: true, 599: true}
	stored := map[int]bool{200: true, 201: true, 204: true, 301: true, 302: true, 303: true, 400: true, 402: true, 404: true, 409: true, 410: true, 422: true}
	for _, s := range []int{200, 201, 204, 301, 302, 303, 307, 308, 400, 402, 404, 408, 409, 410, 422, 429, 500, 501, 502, 503, 504, 599} {
		if got := Retried(s, nil); got != retried[s] {
			t.Errorf("Retried(%d) = %v", s, got)
		}
		if got := Stored(s); got != stored[s] {
			t.Errorf("Stored(%d) = %v", s, got)
		}
	}
	for _, v := range []string{"true", "TRUE", "True"} {
		if Retried(409, http.Header{HeaderReplayed: {v}}) {
			t.Errorf("a 409 with %s: %s is retried", HeaderReplayed, v)
		}
	}
	if !Retried(409, http.Header{HeaderReplayed: {"false"}}) {
		t.Error("a 409 with Idempotent-Replayed: false is not retried")
	}
	for _, s := range []int{500, 502, 503, 504} {
		if Retried(s, http.Header{HeaderReplayed: {"true"}}) {
			t.Errorf("a replayed %d is retried: a replay is the same on every retry", s)
		}
	}
	for _, tt := range []struct {
		status int
		value  string
		want   bool
	}{
		{500, "false", false}, {503, "False", false}, {404, "true", true}, {409, "TRUE", true},
		{400, "true", false}, {422, "True", false}, // final always (client rule 3)
		{500, "", true}, {400, "", false}, {500, "perhaps", true},
	} {
		if got := Retried(tt.status, http.Header{HeaderShouldRetry: {tt.value}}); got != tt.want {
			t.Errorf("Retried(%d, %s: %q) = %v, want %v", tt.status, HeaderShouldRetry, tt.value, got, tt.want)
		}
	}
}
