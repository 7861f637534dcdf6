package idempotency_test

import (
	"os"
	"strings"
	"testing"
)

// TestPackageDocOpeningSaysWhenAHandlerRunsAgain: the package
// documentation opens with what the Middleware guarantees, which is the
// first thing a newcomer reads (go doc prints it first). It promised that
// a keyed request "runs its handler at most once per (scope, key)", while
// its own table says that a takeover after a lapsed lease runs the handler
// again, as the takeover tests show. The opening must name that limit, the
// lease, and what closes the gap for side effects (DerivedKey, or
// transactional mode).
func TestPackageDocOpeningSaysWhenAHandlerRunsAgain(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	end := strings.Index(doc, "\n//\n")
	if end < 0 {
		t.Fatal("doc.go: no paragraph break in the package documentation")
	}
	opening := strings.Join(strings.Fields(strings.ReplaceAll(doc[:end], "//", "")), " ")
	if !strings.Contains(opening, "once") {
		t.Fatalf("the package documentation's opening does not say what runs once: %q", opening)
	}
	for _, want := range []string{"lease", "DerivedKey", "transactional mode"} {
		if !strings.Contains(opening, want) {
			t.Errorf("the package documentation's opening promises the handler runs once, but does not name %q (a takeover after a lapsed lease runs it again):\n%s", want, opening)
		}
	}
}
