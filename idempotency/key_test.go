package idempotency_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

func TestKeyFromHeader(t *testing.T) {
	long := strings.Repeat("a", idempotency.MaxKeyLen)
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{"uuid raw", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"raw with surrounding space", []string{" \tabc \t"}, "abc", nil},
		{"raw with inner space", []string{"a b"}, "a b", nil},
		{"sf-string", []string{`"8e03978e-40d5"`}, "8e03978e-40d5", nil},
		{"sf-string with escapes", []string{`"a\"b\\c"`}, `a"b\c`, nil},
		{"sf-string with comma", []string{`"a,b"`}, "a,b", nil},
		{"sf-string padded", []string{`  "k"  `}, "k", nil},
		{"max length raw", []string{long}, long, nil},
		{"max length sf-string", []string{`"` + long + `"`}, long, nil},
		{"max length after unescaping", []string{`"\\` + long[1:] + `"`}, `\` + long[1:], nil},
		{"missing", nil, "", idempotency.ErrMissingKey},
		{"empty slice", []string{}, "", idempotency.ErrMissingKey},
		{"empty value", []string{""}, "", idempotency.ErrMalformedKey},
		{"only spaces", []string{"   "}, "", idempotency.ErrMalformedKey},
		{"empty sf-string", []string{`""`}, "", idempotency.ErrMalformedKey},
		{"too long raw", []string{long + "a"}, "", idempotency.ErrMalformedKey},
		{"too long sf-string", []string{`"` + long + `a"`}, "", idempotency.ErrMalformedKey},
		{"two fields", []string{"a", "b"}, "", idempotency.ErrMalformedKey},
		{"two equal fields", []string{"a", "a"}, "", idempotency.ErrMalformedKey},
		{"folded list", []string{"a, b"}, "", idempotency.ErrMalformedKey},
		{"folded sf-strings", []string{`"a", "b"`}, "", idempotency.ErrMalformedKey},
		{"non-ASCII", []string{"caf\u00e9"}, "", idempotency.ErrMalformedKey},
		{"control char", []string{"a\x01b"}, "", idempotency.ErrMalformedKey},
		{"DEL", []string{"a\x7fb"}, "", idempotency.ErrMalformedKey},
		{"inner tab", []string{"a\tb"}, "", idempotency.ErrMalformedKey},
		{"raw with quote", []string{`a"b`}, "", idempotency.ErrMalformedKey},
		{"unterminated sf-string", []string{`"abc`}, "", idempotency.ErrMalformedKey},
		{"unterminated after escape", []string{`"abc\"`}, "", idempotency.ErrMalformedKey},
		{"bad escape", []string{`"a\nb"`}, "", idempotency.ErrMalformedKey},
		{"sf-string with parameters", []string{`"abc";x=1`}, "abc", nil},
		{"sf-string with malformed parameters", []string{`"abc";X=1`}, "", idempotency.ErrMalformedKey},
		{"non-ASCII in sf-string", []string{"\"caf\u00e9\""}, "", idempotency.ErrMalformedKey},
		{"non-ASCII after escape", []string{"\"a\\\"\u00e9\""}, "", idempotency.ErrMalformedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idempotency.KeyFromHeader(http.Header{idempotency.HeaderIdempotencyKey: tt.values})
			if len(tt.values) == 1 {
				// ParseKey of the one value says the same.
				k, perr := idempotency.ParseKey(tt.values[0])
				if k != got || (perr == nil) != (err == nil) {
					t.Fatalf("ParseKey(%q) = %q, %v; KeyFromHeader = %q, %v", tt.values[0], k, perr, got, err)
				}
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseKey(%q) = %q, %v; want error %v", tt.values, got, err, tt.wantErr)
				}
				if errors.Is(tt.wantErr, idempotency.ErrMalformedKey) {
					var ke *idempotency.KeyError
					if !errors.As(err, &ke) || ke.Reason == "" {
						t.Errorf("error %v is not a *KeyError with a reason", err)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tt.values, got, err, tt.want)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, "a,b", `"`, `"\`, "", " x ", `"a";b`, "caf\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := idempotency.ParseKey(v)
		if err != nil {
			if !errors.Is(err, idempotency.ErrMalformedKey) {
				t.Fatalf("ParseKey(%q): error %v is not ErrMalformedKey", v, err)
			}
			return
		}
		if len(k) < 1 || len(k) > idempotency.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: length %d out of range", v, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x not printable ASCII", v, k, k[i])
			}
		}
		// Quoting the key as an sf-string must give it back.
		q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if k2, err := idempotency.ParseKey(q); err != nil || k2 != k {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q", q, k2, err, k)
		}
	})
}
