package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// viaLoopback rewrites the host of u, which may be the unspecified address
// the server listens on, to 127.0.0.1.
func viaLoopback(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = net.JoinHostPort("127.0.0.1", pu.Port())
	return pu.String()
}

// adminStatus answers the status and problem type of GET /_mock/faults.
func adminStatus(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/_mock/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ Type string }
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, p.Type
}

// TestAdminFlag: the admin API is on at a loopback address by default, off
// at another address unless -admin asks for it, and off with -admin=false;
// an address that is not loopback is warned about, and so is the admin API
// on it.
func TestAdminFlag(t *testing.T) {
	const exposed = "level=WARN msg=\"mockserver: listening on an address that is not loopback"
	const adminExposed = "level=WARN msg=\"mockserver: the admin API is on at an address that is not loopback: " +
		"anyone who can reach the port can inject faults and read the ledger"
	for _, tc := range []struct {
		name     string
		args     []string
		admin    bool
		warnings []string
	}{
		{"loopback default", nil, true, nil},
		{"localhost default", []string{"-addr", "localhost:0"}, true, nil},
		{"loopback off", []string{"-admin=false"}, false, nil},
		{"unspecified default", []string{"-addr", "0.0.0.0:0"}, false, []string{exposed}},
		{"unspecified on", []string{"-addr", "0.0.0.0:0", "-admin"}, true, []string{exposed, adminExposed}},
		{"unspecified true", []string{"-addr", "0.0.0.0:0", "-admin=true"}, true, []string{exposed, adminExposed}},
		{"unspecified off", []string{"-addr", "0.0.0.0:0", "-admin=false"}, false, []string{exposed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, out, errOut, stop := startCapturing(t, tc.args...)
			defer stop()
			base := viaLoopback(t, u)
			status, typ := adminStatus(t, base)
			want := "admin API off"
			if tc.admin {
				want = "admin API on"
				if status != http.StatusOK {
					t.Errorf("GET /_mock/faults: %d %s, want 200", status, typ)
				}
			} else if status != http.StatusNotFound || typ != mockserver.ProblemNotFound {
				t.Errorf("GET /_mock/faults: %d %q, want 404 %s", status, typ, mockserver.ProblemNotFound)
			}
			if !strings.Contains(out.String(), want) {
				t.Errorf("startup line %q does not say %q", out.String(), want)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr %q lacks the warning %q", errOut.String(), w)
				}
			}
			if n := strings.Count(errOut.String(), "level=WARN"); n != len(tc.warnings) {
				t.Errorf("%d warnings, want %d: %s", n, len(tc.warnings), errOut.String())
			}
			if resp := post(t, base, "admin-flag-1"); resp.StatusCode != http.StatusCreated {
				t.Errorf("payment: %d", resp.StatusCode)
			}
		})
	}
}

// TestTimeoutFlagsTakeEffect: with -read-timeout a request whose body
// stops arriving has its connection closed, and with -idle-timeout an idle
// keep-alive connection is closed, both after the configured time.
func TestTimeoutFlagsTakeEffect(t *testing.T) {
	u, _, stop := start(t, "-read-timeout", "200ms", "-idle-timeout", "300ms")
	defer stop()

	slow := testenv.RawRequest(t, u, "POST /payments HTTP/1.1\r\nHost: mock\r\nIdempotency-Key: slow-1\r\n"+
		"Content-Length: 60\r\n\r\n{\"amount\":")
	defer slow.Close() // before stop, which waits for active connections
	if took := testenv.ClosedWithin(t, slow, slow, 5*time.Second); took > 3*time.Second {
		t.Errorf("slow body cut off after %v, want about 200ms", took)
	}

	idle := testenv.RawRequest(t, u, "GET /balance HTTP/1.1\r\nHost: mock\r\n\r\n")
	defer idle.Close()
	br := bufio.NewReader(idle)
	testenv.ReadResponse(t, br)
	if took := testenv.ClosedWithin(t, idle, br, 5*time.Second); took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("idle connection closed after %v, want about 300ms", took)
	}
}
