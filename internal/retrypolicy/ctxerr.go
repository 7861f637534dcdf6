package retrypolicy

import (
	"context"
	"errors"
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

// UnderContextErr is err, the last attempt's error of an operation that
// ctx ended, under ctx's Err when err does not match it already: net/http
// fails an attempt whose context was canceled with a cause with that
// cause alone, and a caller tests the operation's error with errors.Is
// for context.Canceled or context.DeadlineExceeded. err as it is while
// ctx is not done, or when it is nil.
func UnderContextErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (last attempt: %w)", cerr, err)
	}
	return err
}
