package pgstore

import "testing"

// TestDeallocatedName checks the names that a DEALLOCATE of one statement
// drops, as PostgreSQL reads them, and the statements whose name it does
// not read, after which every prepared statement is forgotten (see
// forgetPrepared).
func TestDeallocatedName(t *testing.T) {
	for sql, want := range map[string]string{
		"DEALLOCATE one":                "one",
		"deallocate prepare One;":       "one",
		`DEALLOCATE "Mixed ""Quoted"""`: `Mixed "Quoted"`,
		"/* c */ DEALLOCATE\n\tx_1 ; ":  "x_1",
		"DEALLOCATE prepare":            "prepare",
		"DEALLOCATE a; DEALLOCATE b":    "",
		"DEALLOCATE ALL":                "all", // its tag tells it apart
		`DEALLOCATE U&"d\0061t"`:        "",
		`DEALLOCATE "unterminated`:      "",
		"DEALLOCATE a123456789012345678901234567890123456789012345678901234567890123": "",
		"SELECT 1": "",
	} {
		if got := deallocatedName(sql); got != want {
			t.Errorf("deallocatedName(%q) = %q, want %q", sql, got, want)
		}
	}
}
