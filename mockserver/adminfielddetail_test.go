package mockserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// goInternals are words of encoding/json's and the package's Go errors,
// which mean nothing to the non-Go teams the admin API is for.
var goInternals = []string{"Go ", "struct", "int64", "type int", "unmarshal", "json:", "mockserver.", "mockserver:"}

// TestAdminFieldDetailIsPlain: an admin field with a value it does not
// take (another JSON type, a fraction, an exponent, a number past its
// range or past int64's) is answered 400 with a detail that says, in the
// API's own words, what the field takes, and nothing is injected. The
// detail was encoding/json's, naming Go's types: "json: cannot unmarshal
// number 99999999999999999999 into Go struct field failRequest.count of
// type int", or the Go API's panic message ("mockserver: negative count
// -1").
func TestAdminFieldDetailIsPlain(t *testing.T) {
	type endpoint struct{ method, path, others string }
	fields := []struct {
		name, rule string
		at         []endpoint
		outside    []string // in int64, outside the field's range
	}{
		{"count", "count must be an integer from 0 to 10000",
			[]endpoint{{"POST", "/_mock/fail", ""}, {"POST", "/_mock/drop-after-commit", ""}, {"POST", "/_mock/delay", `"delay_ms":1,`}},
			[]string{"-1", "10001", "9223372036854775807", "-9223372036854775808"}},
		{"status", "status must be an integer from 400 to 599",
			[]endpoint{{"POST", "/_mock/fail", ""}},
			[]string{"0", "200", "399", "600", "-503", "9223372036854775807"}},
		{"delay_ms", "delay_ms must be an integer from 0 to 3600000",
			[]endpoint{{"POST", "/_mock/delay", ""}},
			[]string{"-1", "3600001", "9223372036854775807"}},
		{"latency_ms", "latency_ms must be an integer from 0 to 3600000",
			[]endpoint{{"PUT", "/_mock/latency", ""}},
			[]string{"-1", "3600001", "-9223372036854775808"}},
	}
	wrong := []string{`"5"`, `""`, `1.5`, `5.0`, `1e3`, `-0.5`, `true`, `[]`, `[1]`, `{}`, `{"n":1}`,
		`99999999999999999999`, `-99999999999999999999`, `9223372036854775808`, `1e400`}
	for _, f := range fields {
		for _, ep := range f.at {
			for _, v := range append(wrong, f.outside...) {
				body := "{" + ep.others + `"` + f.name + `":` + v + "}"
				t.Run(ep.path+" "+body, func(t *testing.T) {
					srv := mockserver.New()
					defer srv.Close()
					resp, b := mustSend(t, srv, ep.method, ep.path, "", body)
					wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
					detail := decodeJSON[struct{ Detail string }](t, b).Detail
					if !strings.Contains(detail, f.rule) {
						t.Errorf("detail %q, want it to say %q", detail, f.rule)
					}
					wantPlain(t, detail)
					if fs := srv.Faults(); len(fs.Fail) != 0 || fs.DropAfterCommit != 0 || len(fs.Delays) != 0 || fs.LatencyMS != 0 {
						t.Errorf("faults after the refused request = %+v, want none", fs)
					}
				})
			}
		}
	}
}

// TestAdminBodyDetailIsPlain: an admin body that is no JSON object, or a
// count that would take the pending faults past MaxFaultCount, is told so
// without Go's words ("cannot unmarshal array into Go value of type
// mockserver.failRequest").
func TestAdminBodyDetailIsPlain(t *testing.T) {
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/_mock/fail", `[]`, "body must be a JSON object"},
		{"POST", "/_mock/fail", `"count"`, "body must be a JSON object"},
		{"PUT", "/_mock/latency", `5`, "body must be a JSON object"},
		{"POST", "/_mock/reset", `[{}]`, "body must be a JSON object"},
		{"DELETE", "/_mock/faults", `true`, "body must be a JSON object"},
		{"POST", "/_mock/expire-keys", `"x"`, "body must be a JSON object"},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.body, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			resp, b := mustSend(t, srv, tc.method, tc.path, "", tc.body)
			wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
			detail := decodeJSON[struct{ Detail string }](t, b).Detail
			if !strings.Contains(detail, tc.want) {
				t.Errorf("detail %q, want it to say %q", detail, tc.want)
			}
			wantPlain(t, detail)
		})
	}

	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(mockserver.MaxFaultCount-1, 503)
	resp, b := mustSend(t, srv, "POST", "/_mock/fail", "", `{"count":2}`)
	wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
	detail := decodeJSON[struct{ Detail string }](t, b).Detail
	if !strings.Contains(detail, "count 2") || !strings.Contains(detail, "9999 pending") {
		t.Errorf("detail %q, want it to give the count and the faults pending", detail)
	}
	wantPlain(t, detail)
}

func wantPlain(t *testing.T, detail string) {
	t.Helper()
	for _, w := range goInternals {
		if strings.Contains(detail, w) {
			t.Errorf("detail %q says %q, a Go internal", detail, w)
		}
	}
}
