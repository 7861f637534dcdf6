package idempotency

import (
	"mime"
	"strings"
)

// bodyType reads the Content-Type ct of a body the fingerprint takes: whether
// the body is JSON (application/json or a +json type, its parameters well
// formed), and the field that names its media type in the hashed stream,
// nil for none.
//
// The media type decides how the application reads the same bytes (an API
// version's vnd.*+json, a JSON Merge Patch or a JSON Patch, a messageType
// parameter), so it is part of the fingerprint: tag 't' and the type in
// lower case with its parameters sorted by name (mime.FormatMediaType), their
// names in lower case; a charset is compared in lower case, and utf-8 is
// dropped from a JSON type, which has no other. A Content-Type that does not
// parse is tag 'u' and its text as it is. A missing Content-Type and
// application/json without other parameters name none, so that their v1
// fingerprints, those of nearly every JSON API request, stay as they were.
func bodyType(f []byte, ct string) (json bool, field []byte) {
	if ct == "" {
		return false, f
	}
	if ct == "application/json" {
		return true, f
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false, appendField(f, 'u', ct)
	}
	json = mt == "application/json" || strings.HasSuffix(mt, "+json")
	if cs, ok := params["charset"]; ok {
		if cs = strings.ToLower(cs); json && cs == "utf-8" {
			delete(params, "charset")
		} else {
			params["charset"] = cs
		}
	}
	if len(params) == 0 {
		if mt == "application/json" {
			return true, f
		}
		// What mime.FormatMediaType gives for a type that parsed, without
		// its allocations.
		return json, appendField(f, 't', mt)
	}
	if s := mime.FormatMediaType(mt, params); s != "" {
		return json, appendField(f, 't', s)
	}
	return json, appendField(f, 'u', ct)
}
