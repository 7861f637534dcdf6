package mockserver

import (
	"bytes"
	"encoding/json"
	"iter"
)

// memberNames yields the names of the members of the JSON object in body,
// in order, as JSON strings decoded (escapes and all), a name given twice
// twice. The members of nested objects are not its members. It stops,
// with no error, where body is no object or not JSON: its callers have,
// or leave, another parser to say what is wrong with it.
func memberNames(body []byte) iter.Seq[string] {
	return func(yield func(string) bool) {
		dec := json.NewDecoder(bytes.NewReader(body))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return
			}
			name, _ := tok.(string)
			if !yield(name) {
				return
			}
			var value json.RawMessage
			if err := dec.Decode(&value); err != nil {
				return
			}
		}
	}
}
