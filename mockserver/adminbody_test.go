package mockserver_test

import (
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestAdminRefusesBodiesItDoesNotTake: an admin endpoint refuses with a
// 400 problem, and does nothing, a body it does not take. POST
// /_mock/reset, POST /_mock/expire-keys and DELETE /_mock/faults take no
// field, yet took any body, garbage included: a tester asking
// expire-keys for {"key": "k1"}, or reset to keep the payments, got a 200
// and every key expired, every payment gone. A fault endpoint took a
// valid object followed by a stray '}' or ']'.
func TestAdminRefusesBodiesItDoesNotTake(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/_mock/reset", `{"keep_payments":true}`},
		{"POST", "/_mock/reset", `garbage`},
		{"POST", "/_mock/expire-keys", `{"key":"k1"}`},
		{"POST", "/_mock/expire-keys", `[]`},
		{"DELETE", "/_mock/faults", `{"count":1}`},
		{"POST", "/_mock/fail", `{"count":1}}`},
		{"POST", "/_mock/drop-after-commit", `{"count":1}]`},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.body, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			if resp, b := mustSend(t, srv, "POST", "/payments", "k1", payBody); resp.StatusCode != http.StatusCreated {
				t.Fatalf("payment: %d %s", resp.StatusCode, b)
			}
			srv.DelayNext(1, 0) // a pending fault that DELETE /_mock/faults or a reset would clear

			resp, b := mustSend(t, srv, tc.method, tc.path, "", tc.body)
			wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)

			if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 1 {
				t.Errorf("faults after the refused request = %+v, want the one delay pending", f)
			}
			if ps := srv.Payments(); len(ps) != 1 {
				t.Errorf("%d payments after the refused request, want the one made", len(ps))
			}
			if resp, b := mustSend(t, srv, "POST", "/payments", "k1", payBody); resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("k1 again after the refused request = %d %s, not a replay: its key expired", resp.StatusCode, b)
			}
		})
	}
}
