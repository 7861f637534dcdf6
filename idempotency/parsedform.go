package idempotency

import (
	"crypto/sha256"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"slices"
)

// formParsed reports whether a handler in front of the Middleware parsed
// r's body as a form (r.FormValue, r.ParseForm, r.ParseMultipartForm): the
// parse consumed the body, so the Middleware reads nothing or what is left,
// while the application reads the parsed form.
func formParsed(r *http.Request) bool {
	return len(r.PostForm) > 0 || r.MultipartForm != nil
}

// appendParsedForm appends to the hashed stream f the field of the form
// parsed from r's body (see formParsed): its values, encoded as a query is
// (sorted by name, the order of repeated values kept), and, for a
// multipart form, each file's field name, file name, part header and the
// SHA-256 of its content. chunk is the copy buffer for the files.
func appendParsedForm(f []byte, r *http.Request, chunk []byte) []byte {
	form := appendField(nil, 'v', r.PostForm.Encode())
	if mf := r.MultipartForm; mf != nil {
		for _, name := range slices.Sorted(maps.Keys(mf.File)) {
			form = appendField(form, 'n', name)
			for _, fh := range mf.File[name] {
				form = appendField(form, 'h', fh.Filename)
				for _, k := range slices.Sorted(maps.Keys(fh.Header)) {
					form = appendField(form, 'k', k)
					for _, v := range fh.Header[k] {
						form = appendField(form, 'e', v)
					}
				}
				form = appendField(form, 'c', fileDigest(fh, chunk))
			}
		}
	}
	return appendField(f, 'f', string(form))
}

// fileDigest returns the SHA-256 of the content of an uploaded file, or
// "!" when it cannot be read, as the application then cannot read it
// either.
func fileDigest(fh *multipart.FileHeader, chunk []byte) string {
	file, err := fh.Open()
	if err != nil {
		return "!"
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, file, chunk); err != nil {
		return "!"
	}
	return string(h.Sum(nil))
}
