package contract

import "testing"

func TestValidToken(t *testing.T) {
	for s, want := range map[string]bool{
		"POST": true, "PROPFIND": true, "M-SEARCH": true, "x!#$%&'*+-.^_`|~9": true,
		"": false, "BAD METHOD": false, "POST\r\n": false, "GET/": false, "Ä": false, `"POST"`: false,
	} {
		if got := ValidToken(s); got != want {
			t.Errorf("ValidToken(%q) = %v, want %v", s, got, want)
		}
	}
}
