package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// readFromLog is a ResponseWriter that counts the calls of its ReadFrom,
// which net/http's own writer has (its sendfile path).
type readFromLog struct {
	http.ResponseWriter
	calls int
}

func (l *readFromLog) ReadFrom(src io.Reader) (int64, error) {
	l.calls++
	return io.Copy(struct{ io.Writer }{l.ResponseWriter}, src)
}

// TestCopyFromAFile: a handler that copies a file into its answer with
// io.Copy reaches the ReadFrom of the writer underneath, net/http's
// sendfile path, once the answer streams because it outgrew the
// recording limit (nothing of it is recorded then), and not before: an
// answer under the limit is recorded whole and replayed byte for byte.
func TestCopyFromAFile(t *testing.T) {
	const limit = 1000
	cases := []struct {
		name     string
		size     int
		readFrom bool // the writer underneath gets a ReadFrom
	}{
		{"under the limit", limit / 2, false},
		{"over the limit", 40 * limit, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content := strings.Repeat("0123456789", c.size/10)
			path := filepath.Join(t.TempDir(), "answer")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			mw := idempotency.Middleware(newStore(t), idempotency.WithMaxResponseBody(limit))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f, err := os.Open(path)
				if err != nil {
					t.Error(err)
					return
				}
				defer f.Close()
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusCreated)
				if n, err := io.Copy(w, f); n != int64(len(content)) || err != nil {
					t.Errorf("io.Copy = %d, %v; want %d, nil", n, err, len(content))
				}
			}))
			send := func() (*httptest.ResponseRecorder, int) {
				r := httptest.NewRequest(http.MethodPost, "/files", strings.NewReader(`{}`))
				r.Header.Set(idempotency.HeaderIdempotencyKey, "k-file")
				rec := httptest.NewRecorder()
				l := &readFromLog{ResponseWriter: rec}
				mw.ServeHTTP(l, r)
				return rec, l.calls
			}
			first, calls := send()
			if first.Code != http.StatusCreated || first.Body.String() != content {
				t.Fatalf("first answer: %d with %d bytes, want 201 with the file's %d", first.Code, first.Body.Len(), len(content))
			}
			if (calls > 0) != c.readFrom {
				t.Errorf("the writer underneath got %d ReadFrom calls; want some: %v", calls, c.readFrom)
			}
			again, _ := send()
			if again.Header().Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("second answer is no replay: %d %v", again.Code, again.Header())
			}
			if c.size > limit {
				wantProblem(t, again, http.StatusGone, idempotency.ProblemResponseTooLarge)
				return
			}
			if again.Code != http.StatusCreated || again.Body.String() != content {
				t.Errorf("replay: %d with %d bytes, want 201 with the file's %d", again.Code, again.Body.Len(), len(content))
			}
		})
	}
}
