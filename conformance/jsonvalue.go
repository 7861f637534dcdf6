package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// decodeJSON decodes the one JSON value b holds, its numbers as
// json.Number: as written, so that an integer above 2^53 is neither
// rounded on its way to a count nor changed in a body sent again.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more data after the JSON value")
	}
	return v, nil
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

// jsonKind names the kind of the decoded JSON value v ("a JSON array").
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a JSON object"
	case []any:
		return "a JSON array"
	case string:
		return "a JSON string"
	case json.Number:
		return "a JSON number"
	case bool:
		return "a JSON boolean"
	}
	return "JSON null"
}
