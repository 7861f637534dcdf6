package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCreateStreamRetriesTheServersStoreRace: the shared nats-server's
// "error creating store for stream" (a race with another stream's
// deletion) is tried again; any other error is returned at once, and the
// store error too once the tries are spent.
func TestCreateStreamRetriesTheServersStoreRace(t *testing.T) {
	storeErr := &jetstream.APIError{Code: 500, ErrorCode: errCodeStreamStoreFailed, Description: "error creating store for stream"}
	other := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse, Description: "stream name already in use"}
	for _, c := range []struct {
		name      string
		errs      []error // what each call returns, nil after the last
		wantCalls int
		wantErr   error
	}{
		{"store race once", []error{storeErr}, 2, nil},
		{"store race until the tries are spent", []error{storeErr, storeErr, storeErr, storeErr, storeErr, storeErr}, streamCreateTries, storeErr},
		{"another error", []error{other}, 1, other},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			_, err := createStream(context.Background(), t, func() (jetstream.Stream, error) {
				calls++
				if calls <= len(c.errs) {
					return nil, c.errs[calls-1]
				}
				return nil, nil
			})
			if calls != c.wantCalls || !errors.Is(err, c.wantErr) {
				t.Errorf("create called %d times, error %v; want %d, %v", calls, err, c.wantCalls, c.wantErr)
			}
		})
	}
}
