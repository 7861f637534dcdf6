package mockcmd

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
)

// adminFlag is the value of -admin: auto (the default: on only at a
// loopback address), true or false. -admin alone means true.
type adminFlag struct {
	set bool // false: auto
	on  bool // when set
}

func (a *adminFlag) String() string {
	if a == nil || !a.set {
		return "auto"
	}
	return strconv.FormatBool(a.on)
}

func (a *adminFlag) Set(v string) error {
	if v == "auto" {
		*a = adminFlag{}
		return nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*a = adminFlag{set: true, on: on}
	return nil
}

// IsBoolFlag lets -admin stand alone for -admin=true.
func (a *adminFlag) IsBoolFlag() bool { return true }

// enabled reports whether the admin API is served at addr, the address the
// server listens on, and logs a warning for each way in which an address
// other than loopback exposes the server: anyone who can reach the port can
// make payments, and with the admin API also inject faults and read every
// key and payment.
func (a adminFlag) enabled(addr net.Addr, log *slog.Logger) bool {
	loopback := isLoopback(addr)
	on := a.on || (!a.set && loopback)
	if loopback {
		return on
	}
	log.Warn("mockserver: listening on an address that is not loopback: anyone who can reach the port can use the payments API",
		"addr", addr.String())
	switch {
	case on:
		log.Warn("mockserver: the admin API is on at an address that is not loopback: anyone who can reach the port can inject faults and read the ledger",
			"addr", addr.String())
	case !a.set:
		log.Info("mockserver: the admin API is off, since the address is not loopback; -admin turns it on",
			"addr", addr.String())
	}
	return on
}

// isLoopback reports whether addr is a TCP address on a loopback interface;
// an unspecified address (0.0.0.0, [::]) listens on every interface, and is
// not.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
