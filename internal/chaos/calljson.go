package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// callJSON sends a request without a body to an instance's url and decodes
// the JSON of a 200 answer into into. status is the answer's status, 0
// when none came; the error of another status holds the start of its body.
func callJSON(ctx context.Context, client *http.Client, method, url string, into any) (status int, err error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, req.URL.Path, resp.StatusCode, b)
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(into)
}
