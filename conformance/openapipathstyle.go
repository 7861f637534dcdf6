package conformance

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// pathSegment is the value v of the path parameter p, named name, as its
// style (simple, the default; label; matrix) and explode (false by
// default) write it, each name and value escaped: an array's values, an
// object's keys and values, joined as OpenAPI's styles (RFC 6570) say.
// false for a value they cannot write (an array of objects, null).
func pathSegment(p map[string]any, name string, v any) (string, bool) {
	if v == nil { // undefined to RFC 6570, which would leave the segment empty
		return "", false
	}
	style, _ := p["style"].(string)
	explode, _ := p["explode"].(bool)
	var items []string // the escaped values, or for an object key=value or key,value
	sep := ","         // between items when not exploded, and in an object's pairs
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			s, ok := scalar(x[k])
			if !ok {
				return "", false
			}
			if explode {
				items = append(items, url.PathEscape(k)+"="+url.PathEscape(s))
			} else {
				items = append(items, url.PathEscape(k), url.PathEscape(s))
			}
		}
		if style == "matrix" && explode { // each pair its own parameter
			return ";" + strings.Join(items, ";"), true
		}
	default:
		values, ok := scalars(v)
		if !ok {
			return "", false
		}
		for _, s := range values {
			items = append(items, url.PathEscape(s))
		}
		if _, isList := v.([]any); isList && explode && style == "matrix" {
			return ";" + url.PathEscape(name) + "=" + strings.Join(items, ";"+url.PathEscape(name)+"="), true
		}
	}
	switch style {
	case "label":
		if explode {
			sep = "."
		}
		return "." + strings.Join(items, sep), true
	case "matrix":
		return ";" + url.PathEscape(name) + "=" + strings.Join(items, sep), true
	}
	return strings.Join(items, sep), true
}
