// Tests of the review of the stalled-drain and huge-budget fixes.

package saferetry

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestDoubledCostIsNeverAffordedByAFullBucketOfMaxInt: a retry after a
// transport error costs twice the configured cost. With a cost above
// MaxInt64/2, twice it is more than any bucket can hold, even one of
// capacity math.MaxInt, full: the retry must not be made. The doubled
// price saturated at MaxInt64, exactly what a full bucket of math.MaxInt
// holds, so the retry was paid with the whole bucket.
func TestDoubledCostIsNeverAffordedByAFullBucketOfMaxInt(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(http.StatusCreated))
	tr, _, hl := testTransport(rc, WithRetryBudget(math.MaxInt, math.MaxInt))
	_, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err == nil || len(rc.Seen()) != 1 {
		t.Errorf("err = %v after %d attempts; want the reset after 1: the retry costs twice MaxInt64", err, len(rc.Seen()))
	}
	if as := hl.Attempts(); len(as) == 0 || as[0].Reason != ReasonBudgetExhausted {
		t.Errorf("attempts %+v; want the first to end with %q", as, ReasonBudgetExhausted)
	}
	if got := tr.policy.Budget.Available(); got != math.MaxInt64 {
		t.Errorf("%d tokens left; want the capacity, %d", got, int64(math.MaxInt64))
	}
}
