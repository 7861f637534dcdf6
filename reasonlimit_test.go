package saferetry_test

import (
	"testing"

	"github.com/saferetry/saferetry"
)

// TestReasonIsLimit: the limits, and only they, are give-ups; a done
// context, a final answer and a name that is no Reason are not.
func TestReasonIsLimit(t *testing.T) {
	limits := map[saferetry.Reason]bool{
		saferetry.ReasonNoKey: true, saferetry.ReasonBodyNotReplayable: true, saferetry.ReasonMaxAttempts: true,
		saferetry.ReasonBackoffStop: true, saferetry.ReasonDeadline: true, saferetry.ReasonBudgetExhausted: true,
	}
	for _, r := range []saferetry.Reason{
		saferetry.ReasonFinalStatus, saferetry.ReasonReplayed, saferetry.ReasonServerSaid,
		saferetry.ReasonRetryableStatus, saferetry.ReasonRetryAfter, saferetry.ReasonTransportError,
		saferetry.ReasonAttemptTimeout, saferetry.ReasonPermanentError, saferetry.ReasonNoKey,
		saferetry.ReasonBodyNotReplayable, saferetry.ReasonMaxAttempts, saferetry.ReasonBudgetExhausted,
		saferetry.ReasonDeadline, saferetry.ReasonContextDone, saferetry.ReasonBackoffStop,
		saferetry.ReasonClassifier, "", "max attempts ", "MAX ATTEMPTS",
	} {
		if got := r.IsLimit(); got != limits[r] {
			t.Errorf("Reason(%q).IsLimit() = %v, want %v", r, got, limits[r])
		}
	}
}
