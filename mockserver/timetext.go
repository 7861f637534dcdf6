package mockserver

import "time"

// appendTimeText appends t as t.AppendText does (RFC 3339 with the
// nanoseconds that are not zero), and returns its error. A time in UTC
// from year 0 to 9999, as every payment the server makes has, is written
// here, at a fraction of AppendText's cost; any other goes through
// AppendText.
func appendTimeText(b []byte, t time.Time) ([]byte, error) {
	year, month, day := t.Date()
	if t.Location() != time.UTC || year < 0 || year > 9999 {
		return t.AppendText(b)
	}
	hour, minute, sec := t.Clock()
	b = appendPair(appendPair(b, year/100), year%100)
	b = appendPair(append(b, '-'), int(month))
	b = appendPair(append(b, '-'), day)
	b = appendPair(append(b, 'T'), hour)
	b = appendPair(append(b, ':'), minute)
	b = appendPair(append(b, ':'), sec)
	if ns := t.Nanosecond(); ns != 0 {
		var d [10]byte
		d[0] = '.'
		for i := 9; i > 0; i-- {
			d[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(d)
		for d[n-1] == '0' {
			n--
		}
		b = append(b, d[:n]...)
	}
	return append(b, 'Z'), nil
}

// appendPair appends 0 <= v < 100 in two decimal digits.
func appendPair(b []byte, v int) []byte {
	return append(b, pairs[2*v], pairs[2*v+1])
}

// pairs are the two-digit decimal numbers, 00 to 99.
const pairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" + "60616263646566676869" +
	"70717273747576777879" + "80818283848586878889" + "90919293949596979899"
