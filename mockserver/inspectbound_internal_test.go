package mockserver

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// inspectorLimit is the bound the inspector is documented to keep to.
const inspectorLimit = MaxInspectedKeys

// TestInspectorIsBounded: a long run with a new key per request (a load
// test, a client that makes a key per attempt) grew the inspector by a
// record per key for as long as the server ran, and a request whose
// Idempotency-Key is no valid key, counted under the value as sent, by all
// of its bytes (up to net/http's 1 MiB of headers) per request. It keeps
// at most inspectorLimit keys, forgetting those used least recently, and
// at most 256 bytes of a key: a key in use keeps exact counts however many
// others came and went, and a value over 256 bytes (never a valid key, of
// at most 255) is counted, and found, under its first 256.
func TestInspectorIsBounded(t *testing.T) {
	var in inspector
	at := time.Now()
	busy := "busy-key"
	for i := range 3 * inspectorLimit {
		in.attempt("k-" + strconv.Itoa(i))
		if i%(inspectorLimit/8) == 0 {
			in.attempt(busy)
			in.answered(busy, keyPos{}, Attempt{Status: 201, Outcome: OutcomeReplayed}.timed(at))
		}
	}
	all := in.all()
	if n := len(all); n > inspectorLimit {
		t.Errorf("the inspector keeps %d keys, want at most %d", n, inspectorLimit)
	}
	if n := in.cur.recs.len() + in.old.recs.len(); n > inspectorLimit {
		t.Errorf("the inspector holds %d records, want at most %d", n, inspectorLimit)
	}
	if all[0].Key != busy {
		t.Errorf("the first key listed is %q, want %q, the first seen", all[0].Key, busy)
	}
	want := 3 * 8 // one attempt every inspectorLimit/8 keys
	if ks := in.stats(busy); ks.Attempts != want || len(ks.History) != want {
		t.Errorf("the key in use: %d attempts, %d in history; want %d, exact", ks.Attempts, len(ks.History), want)
	}
	last := "k-" + strconv.Itoa(3*inspectorLimit-1)
	if ks := in.stats(last); ks.Attempts != 1 {
		t.Errorf("the latest key: %d attempts, want 1", ks.Attempts)
	}

	junk := strings.Repeat("x", 1<<20)
	in.attempt(junk + "1")
	in.attempt(junk + "2")
	ks := in.stats(junk)
	if len(ks.Key) > 256 || ks.Attempts != 2 {
		t.Errorf("a value of 1 MiB: counted under a key of %d bytes, %d attempts; want at most 256 bytes, 2 attempts", len(ks.Key), ks.Attempts)
	}
	if ks := in.stats(junk + "3"); ks.Attempts != 2 {
		t.Errorf("found under another value with the same first 256 bytes: %d attempts, want 2", ks.Attempts)
	}
}
