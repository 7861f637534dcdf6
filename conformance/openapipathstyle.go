package conformance

import (
	"maps"
	"slices"
	"strings"
)

// pathSegment is the value v of the path parameter p, named name, as its
// style (simple, the default; label; matrix) and explode (false by
// default) write it, each name and value percent-encoded as RFC 6570
// does (escapeUnreserved, a reserved "=" or "," too): an array's values,
// an object's keys and values, joined as OpenAPI's styles (RFC 6570)
// say, matrix writing a name with an empty value alone (";v"). false for
// a value they cannot write (an array of objects, null).
func pathSegment(p map[string]any, name string, v any) (string, bool) {
	if v == nil { // undefined to RFC 6570, which would leave the segment empty
		return "", false
	}
	style, _ := p["style"].(string)
	explode, _ := p["explode"].(bool)
	name = escapeUnreserved(name)
	var items []string // the escaped values, or for an object key=value or key,value
	sep := ","         // between items when not exploded, and in an object's pairs
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			s, ok := scalar(x[k])
			if !ok {
				return "", false
			}
			k, s = escapeUnreserved(k), escapeUnreserved(s)
			switch {
			case explode && style == "matrix": // each pair its own parameter
				items = append(items, matrixParam(k, s))
			case explode:
				items = append(items, k+"="+s)
			default:
				items = append(items, k, s)
			}
		}
		if style == "matrix" && explode {
			return ";" + strings.Join(items, ";"), true
		}
	default:
		values, ok := scalars(v)
		if !ok {
			return "", false
		}
		for _, s := range values {
			items = append(items, escapeUnreserved(s))
		}
		if _, isList := v.([]any); isList && explode && style == "matrix" {
			for i, s := range items {
				items[i] = matrixParam(name, s)
			}
			return ";" + strings.Join(items, ";"), true
		}
	}
	switch style {
	case "label":
		if explode {
			sep = "."
		}
		return "." + strings.Join(items, sep), true
	case "matrix":
		return ";" + matrixParam(name, strings.Join(items, sep)), true
	}
	return strings.Join(items, sep), true
}

// matrixParam is the matrix style's name=value, escaped both, or name
// alone when value is empty (RFC 6570's ifemp for ";").
func matrixParam(name, value string) string {
	if value == "" {
		return name
	}
	return name + "=" + value
}
