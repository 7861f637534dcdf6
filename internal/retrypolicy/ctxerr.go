package retrypolicy

import (
	"context"
	"fmt"
)

// ContextErr is the error of a done ctx for an operation it ended: its
// Err, which a caller tests with errors.Is (context.Canceled,
// context.DeadlineExceeded), and its cause too when one was given
// (context.WithCancelCause, WithTimeoutCause). net/http reports the
// cause alone, which an attempt's error then is: the operation's error
// puts the context's Err above it, so that both match there too.
// nil while ctx is not done.
func ContextErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}
