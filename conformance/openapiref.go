package conformance

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// maxRefs bounds a chain of $refs.
const maxRefs = 16

// resolve follows v's $ref ("#/components/parameters/Key"), and its
// target's, to what they point at; v without one is returned as it is.
// A $ref that does not resolve is an error naming it, and saying why: it
// is no string, or points into another document (none is read), at
// nothing, or into a cycle or a chain of more than maxRefs. Its callers
// say where it was.
func resolve(root map[string]any, v any) (any, error) {
	var chain []string
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
		var why string
		switch {
		case slices.Contains(chain, ref):
			why = "a cycle of $refs"
		case len(chain) == maxRefs:
			why = fmt.Sprintf("a chain of more than %d $refs", maxRefs)
		}
		if why != "" {
			return nil, fmt.Errorf("$ref %q does not resolve: %s", chain[0], why)
		}
		chain = append(chain, ref)
		target, err := pointer(root, ref)
		if err != nil {
			if len(chain) > 1 { // the one written here, then the one that failed
				return nil, fmt.Errorf("$ref %q does not resolve: %w", chain[0], err)
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
