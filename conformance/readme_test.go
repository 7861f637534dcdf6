package conformance_test

import (
	"os"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestReadmeExecutionCount: the README's "Check your own API" example says
// how often a run executes the operation on the mock server; it must be
// what a run does.
func TestReadmeExecutionCount(t *testing.T) {
	srv := mockserver.New(mockserver.WithPaymentWork(work))
	defer srv.Close()
	c := fullChecker(srv.URL + "/payments")
	c.AuthA, c.AuthB, c.TTL = nil, nil, 0
	check(t, c, srv.URL+"/payments")
	n := len(srv.Payments())
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	words := map[int]string{1: "once", 2: "twice", 3: "three times"}
	if claim := "execute the operation (" + words[n] + " here"; !strings.Contains(string(raw), claim) {
		t.Errorf("the run made %d payments, but the README does not say %q", n, claim)
	}
}
