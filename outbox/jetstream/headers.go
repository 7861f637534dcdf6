package jetstream

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
)

// ErrHeaderNotCarried is the cause of CheckMessage's errors, and of the
// Publisher's for a message it does not send: a header that NATS would
// deliver changed, or refuses. It wraps outbox.ErrUnpublishable, so the
// relay marks such a message failed at once. Match it with errors.Is.
var ErrHeaderNotCarried = fmt.Errorf("outbox/jetstream: header not carried unchanged by NATS: %w", outbox.ErrUnpublishable)

// maxHeaderBlock is the largest header block JetStream stores (measured:
// a block of 65,536 bytes is refused, "header size exceeds maximum
// allowed of 64k"), "NATS/1.0\r\n", the "name: value\r\n" lines and the
// closing "\r\n" counted.
const maxHeaderBlock = 65535

// CheckMessage returns nil if the Publisher would send m's Headers so that
// Consume hands back each name and value as they are, or an error wrapping
// ErrHeaderNotCarried that names the first header (in name order) that
// breaks one of these rules:
//
//   - A name is not empty and holds only printable ASCII other than
//     space and "()/,:;<=>?@[\]{} (nats.go refuses any other name).
//     Names differing only in case are distinct headers, and both arrive.
//   - A name is not Outbox-Key (KeyHeader) nor starts with "Nats-", in any
//     case: the Publisher sets Outbox-Key and Nats-Msg-Id itself, and
//     JetStream reads Nats-* headers as directives (Nats-Expected-Stream
//     refuses the message, Nats-TTL expires it, Nats-Rollup purges others);
//     a reader that folds case, as HTTP does, could not tell a user's
//     "outbox-key" from the Publisher's.
//   - A value holds no CR or LF and does not start or end with a space or
//     a tab: nats.go trims those ends and writes CR and LF as spaces.
//     Other bytes (inner tabs, control characters, any UTF-8, an empty
//     value) arrive as they are.
//   - The header block, Nats-Msg-Id and Outbox-Key included, is at most
//     65,535 bytes, JetStream's limit. An empty ID counts as the 36
//     bytes of the one Enqueue derives for it.
//
// The Publisher checks every message with it, and with the server's size
// limit (see (*Publisher).CheckMessage). Call one of them before Enqueue
// too, to refuse such a message in the request that makes it rather than
// find it failed after the commit: Enqueue does not know the broker.
func CheckMessage(m outbox.Message) error {
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := checkHeader(k, m.Headers[k]); err != nil {
			return fmt.Errorf("%w: header %q: %w", ErrHeaderNotCarried, k, err)
		}
	}
	if size := headerBlockSize(m); size > maxHeaderBlock {
		return fmt.Errorf("%w: the header block would be %d bytes, over JetStream's %d", ErrHeaderNotCarried, size, maxHeaderBlock)
	}
	return nil
}

// derivedIDLen is the length of the ID Enqueue derives for a message
// without one (idempotency.DerivedKey's, a UUID).
const derivedIDLen = 36

// headerBlockSize is the size of the header block the Publisher sends with
// m, as NATS counts it; an empty ID counts as the one Enqueue derives.
func headerBlockSize(m outbox.Message) int {
	id := len(m.ID)
	if id == 0 {
		id = derivedIDLen
	}
	size := len("NATS/1.0\r\n") + len(natsjs.MsgIDHeader) + id + len(KeyHeader) + len(m.Key) + 2*len(": \r\n") + len("\r\n")
	for k, v := range m.Headers {
		size += len(k) + len(v) + len(": \r\n")
	}
	return size
}

// checkHeader says which rule of CheckMessage's the header name: value breaks.
func checkHeader(name, value string) error {
	if name == "" {
		return errors.New("the name is empty")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"()/,:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Errorf("the name holds %q, which NATS refuses in a name", name[i:i+1])
		}
	}
	if strings.EqualFold(name, KeyHeader) || len(name) >= 5 && strings.EqualFold(name[:5], "Nats-") {
		return errors.New("the name is reserved (Outbox-Key, Nats-*: set by the Publisher, or a JetStream directive)")
	}
	if strings.ContainsAny(value, "\r\n") {
		return errors.New("the value holds a line break, which NATS turns into a space")
	}
	if value != "" && (isBlank(value[0]) || isBlank(value[len(value)-1])) {
		return errors.New("the value starts or ends with a space or a tab, which NATS trims")
	}
	return nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
