package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// count reads CountURL once: the count, whether it is the answer's size in
// bytes rather than a count of records, and the exchange as evidence.
func (r *run) count(ctx context.Context) (n int64, bySize bool, ex Exchange, err error) {
	u, err := url.Parse(r.c.CountURL)
	if err != nil {
		return 0, false, Exchange{}, err
	}
	path := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	ex = r.sd.send(ctx, spec{method: http.MethodGet, url: u.String()})
	if !ex.answered() {
		return 0, false, ex, fmt.Errorf("GET %s: %s", u, ex.Error)
	}
	if ex.Status != http.StatusOK {
		return 0, false, ex, fmt.Errorf("GET %s answered %d, want 200", u, ex.Status)
	}
	n, bySize, err = countOf(ex.body, path)
	if err != nil {
		return 0, false, ex, fmt.Errorf("GET %s: %w", u, err)
	}
	return n, bySize, ex, nil
}

// countOf is the count a CountURL answer holds. At path (a JSON pointer,
// or a dotted path): a number, or an array's length. Without a path: a
// JSON array's length (null counts 0), a JSON number itself, or, for a
// body that is not JSON, its size in bytes, with bySize true. Any other
// JSON body without a path is an error: the size of an object grows by
// more than its records (one more digit in an id, a longer timestamp), so
// counting its bytes would take a correct server for one that executed
// twice.
func countOf(body []byte, path string) (n int64, bySize bool, err error) {
	if path == "" && !json.Valid(body) {
		return int64(len(body)), true, nil
	}
	v, err := decodeJSON(body)
	if err != nil {
		return 0, false, fmt.Errorf("the answer is not JSON: %w", err)
	}
	where := "the answer"
	if path != "" {
		parts := strings.Split(path, ".")
		if strings.HasPrefix(path, "/") {
			parts = pointerParts(path)
		}
		if v, err = walk(v, parts); err != nil {
			return 0, false, fmt.Errorf("#%s: %w", path, err)
		}
		where = "#" + path
	} else if v == nil {
		return 0, false, nil // null: an empty list
	}
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, false, fmt.Errorf("%s is %s, not an integer", where, x)
		}
		return n, false, nil
	case []any:
		return int64(len(x)), false, nil
	}
	if path == "" {
		return 0, false, errors.New("the answer is JSON but neither an array nor a number: give #/path to the count (a JSON pointer in the count URL's fragment)")
	}
	return 0, false, fmt.Errorf("%s is neither a number nor an array", where)
}
