package contract

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
)

// ContentTypeProblem is the media type of RFC 9457 problem documents.
const ContentTypeProblem = "application/problem+json"

// WriteProblem answers with status and the problem document doc: a struct
// that marshals to a JSON object with at least the "type", "title" and
// "status" members (extension members are the caller's fields). The body
// ends with a newline. The answer carries Cache-Control: no-store, since a
// problem describes one attempt and a retry may be answered otherwise (a 409
// in progress becomes the stored 201). retryAfter > 0 adds a Retry-After
// header of that many seconds.
func WriteProblem(w http.ResponseWriter, status int, doc any, retryAfter int) {
	body, err := json.Marshal(doc)
	if err != nil { // cannot happen with the documents of this module
		body = []byte(`{"type":"about:blank"}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// DecodeProblem decodes body into v, as json.Unmarshal does, when h says
// that it is a problem document (Content-Type application/problem+json,
// parameters allowed), and reports whether it did; a body of another media
// type, or one that does not decode, leaves ok false.
func DecodeProblem(h http.Header, body []byte, v any) (ok bool) {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == ContentTypeProblem && json.Unmarshal(body, v) == nil
}
