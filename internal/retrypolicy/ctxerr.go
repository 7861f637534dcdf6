package retrypolicy

import (
	"context"
	"fmt"
)

// ContextErr is the error of a done ctx for an operation it ended: its
// Err, which a caller tests with errors.Is (context.Canceled,
// context.DeadlineExceeded), and its cause too when one was given
// (context.WithCancelCause, WithTimeoutCause), as net/http reports it.
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
