package pgstore

import "testing"

// TestMayCommit checks the words that make a statement cut short worth
// settling (see Tx.settleCutShort): COMMIT and END as words, in any case,
// erring on the side of yes, and not as parts of other words.
func TestMayCommit(t *testing.T) {
	for sql, want := range map[string]bool{
		"COMMIT":                               true,
		"commit;":                              true,
		"END":                                  true,
		"COMMIT AND CHAIN":                     true,
		"INSERT INTO t VALUES (1); Commit":     true,
		"SELECT CASE WHEN true THEN 1 END":     true, // a false alarm, on the safe side
		"INSERT INTO pending_commits VALUES 1": false,
		"SELECT append, endpoint FROM t":       false,
		"SELECT pg_sleep(5)":                   false,
		"UPDATE t SET recommit = $1":           false,
	} {
		if got := mayCommit(sql); got != want {
			t.Errorf("mayCommit(%q) = %v, want %v", sql, got, want)
		}
	}
}
