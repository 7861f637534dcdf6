package conformance

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// resolve follows v's $ref ("#/components/parameters/Key"), and its
// target's, to what they point at, however long the chain; v without one
// is returned as it is. A $ref that does not resolve is an error naming
// it, and saying why: it is no string, or points into another document
// (none is read), at nothing, or into a cycle. Its callers say where it
// was.
//
// Every link of a chain is the $ref of an object of the document, so a
// chain that never comes back to a $ref it followed ends: no bound on its
// length is needed to stop.
func resolve(root map[string]any, v any) (any, error) {
	var first string
	var seen map[string]bool
	for {
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		raw, ok := m["$ref"]
		if !ok {
			return v, nil
		}
		ref, ok := raw.(string)
		if !ok {
			js, _ := json.Marshal(raw)
			return nil, fmt.Errorf("$ref %s is not a string (a reference such as \"#/components/...\")", js)
		}
		if seen[ref] {
			return nil, fmt.Errorf("$ref %q does not resolve: a cycle of $refs (back to %q)", first, ref)
		}
		if seen == nil {
			first, seen = ref, make(map[string]bool)
		}
		seen[ref] = true
		target, err := pointer(root, ref)
		if err != nil {
			if ref != first { // the one written here, then the one that failed
				return nil, fmt.Errorf("$ref %q does not resolve: %w", first, err)
			}
			return nil, err
		}
		v = target
	}
}

// pointer walks the JSON pointer of a $ref into root; one into another
// document is an error saying so.
func pointer(root map[string]any, ref string) (any, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q is external: only $refs into the document itself (\"#/...\") are read", ref)
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return root, nil
	}
	v, err := walk(root, pointerParts(frag))
	if err != nil {
		return nil, fmt.Errorf("$ref %q does not resolve: %w", ref, err)
	}
	return v, nil
}
