package testenv

import (
	"context"
	"io"
	"net/http"
	"strings"
)

// Reply is the answer to one request a test sent: its status, header and
// body, and whether the server marked it a replay; Err is set when no
// answer came.
type Reply struct {
	Status   int
	Header   http.Header
	Body     string
	Replayed bool
	Err      error
}

// Post sends one POST of the JSON body with the Idempotency-Key key to url
// through client (http.DefaultClient when nil) and reads the whole answer.
func Post(ctx context.Context, client *http.Client, url, key, body string) Reply {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return Reply{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(b),
		Replayed: resp.Header.Get("Idempotent-Replayed") == "true", Err: err}
}
