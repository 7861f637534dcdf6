package chaos

import "testing"

func TestHostPortOnlyLoopback(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want string // "" for an error
	}{
		{"postgres://postgres@127.0.0.1:5432/test", "127.0.0.1:5432"},
		{"postgres://postgres@localhost:6543/test", "localhost:6543"},
		{"postgres://postgres@[::1]:5432/test", "[::1]:5432"},
		{"postgres://postgres@db.example.com:5432/test", ""},
		{"postgres://postgres@10.0.0.7/test", ""},
	} {
		got, err := hostPort(tt.url)
		if (err == nil) != (tt.want != "") || got != tt.want {
			t.Errorf("hostPort(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
}
