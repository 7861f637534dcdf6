package interop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/saferetryablehttp"
)

// A go-retryablehttp client given saferetry's rules by
// saferetryablehttp.Configure pays once against the reference server through
// a 503 and an answer lost after commit, and gets the stored answer.
func TestRetryableHTTPLostAnswerIsReplayed(t *testing.T) {
	srv := mockserver.New()
	t.Cleanup(srv.Close)
	srv.FailNext(1, http.StatusServiceUnavailable)
	srv.DropAfterCommitNext(1)

	rc := retryablehttp.NewClient()
	rc.HTTPClient = srv.Client()
	rc.RetryWaitMin, rc.RetryWaitMax = time.Millisecond, 5*time.Millisecond
	rc.Logger = nil
	saferetryablehttp.Configure(rc)

	req, err := retryablehttp.NewRequestWithContext(context.Background(), http.MethodPost,
		srv.URL+"/payments", []byte(`{"amount":1500,"currency":"EUR","recipient":"user_42"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rc.Do(req)
	body := replayed201(t, resp, err)

	key, ok := saferetry.KeyFromResponse(resp)
	if !ok {
		t.Fatal("the response carries no key")
	}
	st := srv.Stats(key)
	if st.Executions != 1 || st.Attempts != 3 || st.Payments != 1 {
		t.Errorf("stats %+v, want 1 execution, 3 attempts (503, dropped, replayed), 1 payment", st)
	}
	var paid mockserver.Payment
	if err := json.Unmarshal(body, &paid); err != nil {
		t.Fatalf("replayed body %s: %v", body, err)
	}
	payments := srv.Payments()
	if len(payments) != 1 || payments[0].ID != paid.ID {
		t.Errorf("ledger %+v, want the one payment %s the client got", payments, paid.ID)
	}
	if got, want := srv.Balance("EUR"), mockserver.DefaultBalance-1500; got != want {
		t.Errorf("balance %d, want %d: debited once", got, want)
	}
}
