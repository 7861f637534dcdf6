package mockserver

import (
	"reflect"
	"testing"
	"time"
)

// TestAttemptRecordRoundTrip checks that the inspector gives back every
// attempt as it was recorded.
func TestAttemptRecordRoundTrip(t *testing.T) {
	now := time.Now() // with a monotonic reading, which timed drops
	for i, o := range outcomes {
		for _, at := range []time.Time{now, now.Add(-time.Hour).In(time.FixedZone("x", 3600)), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 999999999, time.UTC)} {
			a := Attempt{Status: 200 + i, Outcome: o}.timed(at)
			if got := recordAttempt(a).attempt(); !reflect.DeepEqual(got, a) {
				t.Errorf("recorded %+v, got back %+v", a, got)
			}
		}
	}
}

func TestInspectorHistory(t *testing.T) {
	var in inspector
	at := time.Now()
	var want []Attempt
	for i := range maxHistory + 3 {
		in.attempt("k")
		a := Attempt{Status: 200 + i, Outcome: OutcomeReplayed}.timed(at)
		in.answered("k", keyPos{}, a)
		if i < maxHistory {
			want = append(want, a)
		}
	}
	in.execution("k", keyPos{})
	in.attempt("other")
	got := in.stats("k")
	if got.Key != "k" || got.Attempts != maxHistory+3 || got.Executions != 1 || !reflect.DeepEqual(got.History, want) {
		t.Errorf("stats = %+v, want %d attempts, 1 execution, history %+v", got, maxHistory+3, want)
	}
	all := in.all()
	if len(all) != 2 || !reflect.DeepEqual(all[0], got) || all[1].Key != "other" || all[1].Attempts != 1 || all[1].History == nil || len(all[1].History) != 0 {
		t.Errorf("all = %+v", all)
	}
	if ks := in.stats("unseen"); ks.Key != "unseen" || ks.Attempts != 0 || ks.History == nil {
		t.Errorf("stats of an unseen key = %+v", ks)
	}
	in.reset()
	if all := in.all(); len(all) != 0 {
		t.Errorf("after reset, all = %+v", all)
	}
}

// TestInspectorKeys: keys kept as bytes come back as given, in the order
// first seen, each with its own counts; the empty key and a key that is
// another's prefix included.
func TestInspectorKeys(t *testing.T) {
	var in inspector
	keys := []string{"k-1", "", "k-10", "k-1\x00", "ключ"}
	for n, k := range keys {
		for range n + 1 {
			in.attempt(k)
		}
	}
	in.execution("k-10", keyPos{})
	all := in.all()
	if len(all) != len(keys) {
		t.Fatalf("%d keys, want %d", len(all), len(keys))
	}
	for n, k := range keys {
		if all[n].Key != k || all[n].Attempts != n+1 {
			t.Errorf("key %d = %q with %d attempts; want %q with %d", n, all[n].Key, all[n].Attempts, k, n+1)
		}
		if got := in.stats(k); got.Attempts != n+1 || got.Executions != map[bool]int{true: 1}[k == "k-10"] {
			t.Errorf("stats(%q) = %+v", k, got)
		}
	}
	if got := in.stats("k-2"); got.Attempts != 0 || got.Key != "k-2" {
		t.Errorf("stats of a key never seen = %+v", got)
	}
}
