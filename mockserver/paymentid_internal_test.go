package mockserver

import "testing"

// TestNewPaymentIDShape checks the payment IDs as Payment.ID documents
// them, "pay_" and 16 lower-case hex digits, and that they do not repeat.
func TestNewPaymentIDShape(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, n)
	for range n {
		id := newPaymentID()
		if len(id) != len("pay_")+16 || id[:4] != "pay_" {
			t.Fatalf("ID %q: want pay_ and 16 hex digits", id)
		}
		for _, c := range id[4:] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("ID %q: %q is no lower-case hex digit", id, c)
			}
		}
		if seen[id] {
			t.Fatalf("ID %q made twice in %d", id, len(seen))
		}
		seen[id] = true
	}
}
