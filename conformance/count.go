package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// count reads CountURL once: the count, and the exchange as evidence.
func (r *run) count(ctx context.Context) (int64, Exchange, error) {
	u, err := url.Parse(r.c.CountURL)
	if err != nil {
		return 0, Exchange{}, err
	}
	path := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	ex := r.sd.send(ctx, spec{method: http.MethodGet, url: u.String()})
	if !ex.answered() {
		return 0, ex, fmt.Errorf("GET %s: %s", u, ex.Error)
	}
	if ex.Status != http.StatusOK {
		return 0, ex, fmt.Errorf("GET %s answered %d, want 200", u, ex.Status)
	}
	n, err := countOf(ex.body, path)
	if err != nil {
		return 0, ex, fmt.Errorf("GET %s: %w", u, err)
	}
	return n, ex, nil
}

// countOf is the count a CountURL answer holds: at path (a JSON pointer,
// or a dotted path), a number or an array's length; without a path, a
// JSON array's length, or else the body's size.
func countOf(body []byte, path string) (int64, error) {
	if path == "" {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil {
			return int64(len(arr)), nil
		}
		return int64(len(body)), nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("the answer is not JSON: %w", err)
	}
	parts := strings.Split(path, ".")
	if strings.HasPrefix(path, "/") {
		parts = pointerParts(path)
	}
	v, err := walk(v, parts)
	if err != nil {
		return 0, fmt.Errorf("#%s: %w", path, err)
	}
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("#%s is %s, not an integer", path, x)
		}
		return n, nil
	case []any:
		return int64(len(x)), nil
	}
	return 0, fmt.Errorf("#%s is neither a number nor an array", path)
}

// pointerParts splits a JSON pointer ("/a/b~1c") into its unescaped
// reference tokens.
func pointerParts(ptr string) []string {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
}

// walk descends the decoded JSON value v by parts: object members, and
// array indexes.
func walk(v any, parts []string) (any, error) {
	for _, p := range parts {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[p]
			if !ok {
				return nil, fmt.Errorf("no member %q", p)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(node) {
				return nil, fmt.Errorf("no element %q", p)
			}
			v = node[i]
		default:
			return nil, fmt.Errorf("nothing at %q", p)
		}
	}
	return v, nil
}
