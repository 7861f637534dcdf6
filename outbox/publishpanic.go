package outbox

import "fmt"

// publishPanic is the failure of a batch whose Publish call panicked with
// value, or called runtime.Goexit (value nil): it is written to the
// batch's rows (last_error) as any Publisher's error, and logged with the
// stack of the call.
type publishPanic struct {
	value any
	stack []byte
}

func (p *publishPanic) Error() string {
	if p.value == nil {
		return "outbox: the Publisher did not return (runtime.Goexit)"
	}
	return fmt.Sprintf("outbox: the Publisher panicked: %v", p.value)
}
