package mockserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestAdminRefusesBodiesItDoesNotTake: an admin endpoint refuses with a
// 400 problem, and does nothing, a body it does not take. POST
// /_mock/reset, POST /_mock/expire-keys and DELETE /_mock/faults take no
// field, yet took any body, garbage included: a tester asking
// expire-keys for {"key": "k1"}, or reset to keep the payments, got a 200
// and every key expired, every payment gone. A fault endpoint took a
// valid object followed by a stray '}' or ']'. A JSON null, no object,
// was taken for an empty body: reset, or a failure injected.
func TestAdminRefusesBodiesItDoesNotTake(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/_mock/reset", `{"keep_payments":true}`},
		{"POST", "/_mock/reset", `garbage`},
		{"POST", "/_mock/expire-keys", `{"key":"k1"}`},
		{"POST", "/_mock/expire-keys", `[]`},
		{"POST", "/_mock/reset", `null`},
		{"POST", "/_mock/fail", "\ufeffnull"},
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

// TestAdminFieldNamesAreCaseSensitive: a fault endpoint takes its fields
// by their names as documented, to the letter. encoding/json matches names
// without case, so {"Count":5} or {"COUNT":5} was taken as count, and
// {"Status":500} as status: a client that spells a field otherwise is
// told, with a 400 problem naming the field as it sent it, and nothing is
// injected, as for any field the endpoint does not take.
func TestAdminFieldNamesAreCaseSensitive(t *testing.T) {
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/_mock/fail", `{"Count":5}`, `"Count"`},
		{"POST", "/_mock/fail", `{"count":1,"STATUS":500}`, `"STATUS"`},
		{"POST", "/_mock/drop-after-commit", `{"cOuNt":2}`, `"cOuNt"`},
		{"POST", "/_mock/delay", `{"Delay_ms":5}`, `"Delay_ms"`},
		{"POST", "/_mock/delay", `{"delay_ms":5,"count":1,"Count":3}`, `"Count"`},
		{"PUT", "/_mock/latency", `{"LATENCY_MS":5}`, `"LATENCY_MS"`},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) { wantFieldRefused(t, tc.method, tc.path, tc.body, tc.field) })
	}
}

// TestAdminBodyByteOrderMark: a UTF-8 byte order mark before an admin
// body's JSON is ignored, as RFC 8259 (section 8.1) lets a parser do: it
// cannot change what the body says, and an editor or a shell that saves
// UTF-8 with one (Windows PowerShell's -InFile of such a file) sends it.
// encoding/json refused it as "invalid character 'ï'". A mark anywhere
// else is no JSON, and is refused.
func TestAdminBodyByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	srv := mockserver.New()
	defer srv.Close()
	if resp, b := mustSend(t, srv, "POST", "/_mock/fail", "", bom+`{"count":2,"status":502}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("a body after a byte order mark: %d %s", resp.StatusCode, b)
	}
	if f := srv.Faults(); len(f.Fail) != 2 || f.Fail[0] != http.StatusBadGateway {
		t.Errorf("faults = %+v, want two 502s", f)
	}
	if resp, b := mustSend(t, srv, "DELETE", "/_mock/faults", "", bom); resp.StatusCode != http.StatusOK {
		t.Errorf("a byte order mark alone, an empty request: %d %s", resp.StatusCode, b)
	}
	for _, body := range []string{" " + bom + `{"count":1}`, `{"count":1}` + bom, bom + bom + `{"count":1}`} {
		resp, b := mustSend(t, srv, "POST", "/_mock/fail", "", body)
		wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
	}
	if f := srv.Faults(); len(f.Fail) != 0 {
		t.Errorf("faults = %+v after the refused bodies, want none", f)
	}
}

// TestAdminRefusesDuplicateFields: a field given twice in one body is
// ambiguous (RFC 8259 4: names SHOULD be unique, and parsers differ on
// which value wins): encoding/json took the last, so {"count":1,"count":3}
// injected three failures where a client reading the first meant one. It
// is a 400 problem naming the field, and nothing is injected.
func TestAdminRefusesDuplicateFields(t *testing.T) {
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/_mock/fail", `{"count":1,"count":3}`, `"count"`},
		{"POST", "/_mock/fail", `{"status":500,"count":1,"status":502}`, `"status"`},
		{"POST", "/_mock/delay", `{"delay_ms":5,"delay_ms":5}`, `"delay_ms"`},
		{"POST", "/_mock/delay", `{"delay_ms":5,"\u0064elay_ms":7}`, `"delay_ms"`},
		{"PUT", "/_mock/latency", `{"latency_ms":5,"latency_ms":0}`, `"latency_ms"`},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) { wantFieldRefused(t, tc.method, tc.path, tc.body, tc.field) })
	}
}

// wantFieldRefused sends body to a new mock server's admin endpoint and
// wants a 400 problem whose detail names field, and no fault injected.
func wantFieldRefused(t *testing.T, method, path, body, field string) {
	t.Helper()
	srv := mockserver.New()
	defer srv.Close()
	resp, b := mustSend(t, srv, method, path, "", body)
	wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
	if detail := decodeJSON[struct{ Detail string }](t, b).Detail; !strings.Contains(detail, field) {
		t.Errorf("detail %q does not name the field %s", detail, field)
	}
	if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 0 || f.LatencyMS != 0 {
		t.Errorf("faults after the refused request = %+v, want none", f)
	}
}
