package mockserver

import "testing"

// TestAdminFieldRanges: every field of every admin request type has its
// range in adminRanges, which readAdminBody checks and its details give.
func TestAdminFieldRanges(t *testing.T) {
	for _, names := range [][]string{adminFields[failRequest](), adminFields[dropRequest](), adminFields[delayRequest](), adminFields[latencyRequest]()} {
		for _, name := range names {
			if r, ok := adminRanges[name]; !ok || r.min > r.max {
				t.Errorf("admin field %s has no range", name)
			}
		}
	}
}
