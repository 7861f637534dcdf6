package idempotency_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestDocNamesEveryFragmentResponse: the package documentation lists the
// OpenAPI fragment's response components, and the responses to give each
// protected operation when merging the fragment by hand. Every response
// the fragment has (with the default options and with WithScope, which
// adds the 500) must be in both lists; a hand-merged description would
// otherwise lack an answer the Middleware gives (the 408 of a late body
// was missing from both).
func TestDocNamesEveryFragmentResponse(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	components := section(t, doc, "//\tresponses ", "//\tx-idempotency")
	merge := section(t, doc, "//\t\"responses\": {", "//\t},")
	scoped := idempotency.OpenAPI(idempotency.WithScope(func(*http.Request) (string, error) { return "", nil }))
	for name := range scoped.Components()["responses"] {
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(components) {
			t.Errorf("the documentation's list of the fragment's responses lacks %s", name)
		}
	}
	for status := range scoped.Operation().Responses {
		if status == "500" {
			continue // only with WithScope, which the merge example does not assume
		}
		if !strings.Contains(merge, `"`+status+`"`) {
			t.Errorf("the documentation's responses to merge by hand lack %s", status)
		}
	}
}

// section returns the text of doc from the line that begins with from to
// the next line that begins with to.
func section(t *testing.T, doc, from, to string) string {
	t.Helper()
	i := strings.Index(doc, from)
	if i < 0 {
		t.Fatalf("doc.go has no %q", from)
	}
	j := strings.Index(doc[i:], to)
	if j < 0 {
		t.Fatalf("doc.go has no %q after %q", to, from)
	}
	return doc[i : i+j]
}
