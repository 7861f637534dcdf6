package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// methods are the operation members of an OpenAPI path item, query's
// since OpenAPI 3.2.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"}

// methodOperation is an operation member of a path item: the method it is
// sent with, the member as written (perhaps a $ref), and, for an
// additionalOperations entry, why it is none OpenAPI allows ("" when it
// is).
type methodOperation struct {
	method    string
	op        any
	forbidden string
}

// itemOperations are the operation members of the path item item that
// are present (not null): those of methods, in that order, then the
// entries of OpenAPI 3.2's additionalOperations in name order, whose
// names are the methods as sent (LINK), an entry whose name is empty,
// is no HTTP method (an RFC 9110 token), or is that of a method with a
// field of its own, forbidden. additionalOperations that is no object is an error.
func itemOperations(item map[string]any) ([]methodOperation, error) {
	var out []methodOperation
	for _, m := range methods {
		if v, ok := item[m]; ok && v != nil {
			out = append(out, methodOperation{method: strings.ToUpper(m), op: v})
		}
	}
	raw, ok := item["additionalOperations"]
	if !ok || raw == nil {
		return out, nil
	}
	extra, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("additionalOperations: not an object (of methods to operations)")
	}
	names := make([]string, 0, len(extra))
	for name, op := range extra {
		if op != nil { // none, as a method member that is null
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		mo := methodOperation{method: name, op: extra[name]}
		switch field := strings.ToLower(name); {
		case name == "":
			mo.forbidden = `its additionalOperations entry "" has an empty method name (not an HTTP method): no request can be sent with it; name the entry for its method, such as LINK`
		case !contract.ValidToken(name):
			mo.forbidden = fmt.Sprintf("its additionalOperations entry %q is not an HTTP method (an RFC 9110 token, such as LINK): no request can be sent with it", name)
		case slices.Contains(methods, field):
			mo.forbidden = fmt.Sprintf("its additionalOperations entry %q is for a method with a field of its own (%s): OpenAPI allows none, write the operation there", name, field)
		}
		out = append(out, mo)
	}
	return out, nil
}

// opName is the name of an operation without an operationId: its method
// and its path, an empty method (an additionalOperations entry named "")
// written "" so that it shows.
func opName(method, path string) string {
	if method == "" {
		method = `""`
	}
	return method + " " + path
}
