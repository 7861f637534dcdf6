package mockserver

import (
	"strconv"
	"testing"
	"time"
)

// TestInspectorPositionLapses: the calls after a request's attempt find
// its key's record where attempt put it, and by the key, which they count
// under all the same, once the tables turned or were reset since.
func TestInspectorPositionLapses(t *testing.T) {
	at := time.Now()
	check := func(in *inspector, key string, attempts, executions, history int) {
		t.Helper()
		if got := in.stats(key); got.Attempts != attempts || got.Executions != executions || len(got.History) != history {
			t.Fatalf("stats(%q) = %d attempts, %d executions, %d attempts in history; want %d, %d, %d",
				key, got.Attempts, got.Executions, len(got.History), attempts, executions, history)
		}
	}

	var in inspector
	pos := in.attempt("k")
	in.execution("k", pos)
	in.answered("k", pos, Attempt{Status: 201, Outcome: OutcomeExecuted}.timed(at))
	check(&in, "k", 1, 1, 1)

	// The tables turn: "k" is now in the older one, and another key at
	// its position in the newer one.
	pos = in.attempt("k")
	for i := range MaxInspectedKeys / 2 {
		in.attempt("other-" + strconv.Itoa(i))
	}
	in.execution("k", pos)
	in.answered("k", pos, Attempt{Status: 201, Outcome: OutcomeReplayed}.timed(at))
	check(&in, "k", 2, 2, 2)
	for i := range 2 {
		check(&in, "other-"+strconv.Itoa(i), 1, 0, 0)
	}

	// Reset: the request's calls after it count under the key anew.
	pos = in.attempt("k")
	in.reset()
	in.execution("k", pos)
	in.answered("k", pos, Attempt{Status: 201, Outcome: OutcomeExecuted}.timed(at))
	check(&in, "k", 0, 1, 1)
}
