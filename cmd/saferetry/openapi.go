package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/saferetry/saferetry/conformance"
)

// maxDocument bounds the OpenAPI document read.
const maxDocument = 16 << 20

// operations reads -openapi (a URL or a file) and returns the operations
// that declare Idempotency-Key, or may (conformance.FromOpenAPI).
func (f *checkFlags) operations(ctx context.Context) ([]conformance.Operation, error) {
	src := f.openapi
	var doc []byte
	docURL := ""
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		docURL = src
		ctx, cancel := context.WithTimeout(ctx, f.checker.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, fmt.Errorf("saferetry check: -openapi: %w", err)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("saferetry check: -openapi: cannot read the document: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("saferetry check: -openapi: GET %s answered %d", src, resp.StatusCode)
		}
		if doc, err = io.ReadAll(io.LimitReader(resp.Body, maxDocument+1)); err != nil {
			return nil, fmt.Errorf("saferetry check: -openapi: reading the document: %w", err)
		}
		if len(doc) > maxDocument {
			return nil, fmt.Errorf("saferetry check: -openapi: the document at %s is larger than %d MiB, the most read from a URL: give it as a file", src, maxDocument>>20)
		}
	} else {
		var err error
		if doc, err = os.ReadFile(src); err != nil {
			return nil, fmt.Errorf("saferetry check: -openapi: %w", err)
		}
	}
	ops, err := conformance.FromOpenAPI(doc, docURL, f.url)
	if err != nil {
		return nil, fmt.Errorf("saferetry check: -openapi %s: %w", src, err)
	}
	return ops, nil
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
