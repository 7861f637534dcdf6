package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// Message is one event to publish. The zero value is not a valid message:
// Topic is required. It is a plain value: Enqueue keeps no reference to it,
// and a Publisher may read it from any goroutine.
type Message struct {
	// ID identifies the message everywhere: the outbox row (unique:
	// enqueueing an ID that exists is a no-op), the broker's deduplication
	// (the jetstream Publisher sends it as Nats-Msg-Id) and the consumer's
	// inbox. If empty, Enqueue derives it from the protected request the
	// context belongs to (idempotency.DerivedKey with the label
	// "outbox:" + Topic + ":" + Key), so that a re-run of the request
	// enqueues the same ID; outside a protected request an empty ID is an
	// error (ErrNoID). The label does not tell ("order", "created:1") from
	// ("order:created", "1"): Topic and Key pairs that join to the same
	// label derive the same ID, so give such messages IDs of their own.
	//
	// An ID must not start or end with a space, nor hold a control
	// character, a tab included (ErrInvalidMessage): a broker header
	// carries it, and NATS trims such values and turns line breaks into
	// spaces, so that "m-1" and "m-1 " would be one message to the
	// broker's deduplication and the second would be dropped.
	ID string
	// Topic says what happened ("payment.created"); the jetstream Publisher
	// makes it the subject, which must hold no white space nor empty token
	// and, with the Publisher's prefix, be at most 3,840 bytes (else the
	// message is failed at once: see that Publisher's CheckMessage).
	Topic string
	// Key orders: the messages of one Key are handed to the Publisher in
	// the order their transactions committed. Empty means unordered. A
	// broker header carries it too (the jetstream Publisher's Outbox-Key),
	// so it obeys ID's rule: no space at either end, no control character
	// (ErrInvalidMessage); "k " would arrive as "k".
	Key string
	// Payload is the message body; nil is sent as an empty body.
	Payload []byte
	// Headers are sent with the message; nil means none. Names and values
	// must be valid UTF-8 without NUL (ErrInvalidMessage), as must ID,
	// Topic and Key. What else a header may hold is the broker's: a
	// Publisher refuses a header its broker would deliver changed
	// (ErrUnpublishable: the relay marks the message failed at once, see
	// Failed), and may offer a check to call before Enqueue (the jetstream
	// one's CheckMessage: no line break, no space or tab at a value's
	// ends, names of printable ASCII, none reserved).
	Headers map[string]string
}

// Errors of Enqueue, matchable with errors.Is.
var (
	// ErrNoID: a message has no ID and the context is not a protected
	// request, so there is nothing to derive one from.
	ErrNoID = errors.New("outbox: message has no ID outside a protected request")
	// ErrInvalidMessage: a message has no Topic, an ID or Key a broker
	// header would not carry unchanged (see Message), an ID, Topic, Key,
	// header name or header value that is not valid UTF-8 or holds NUL
	// (the outbox's text and jsonb columns cannot keep it), or one call
	// holds the same ID twice (two messages of one request with the same Topic
	// and Key need IDs of their own).
	ErrInvalidMessage = errors.New("outbox: invalid message")
	// ErrInvalidAge: DeletePublished or DeleteProcessed was given an age
	// of zero or less, which would delete every row, those that a
	// redelivery or a repeated Enqueue still needs among them. Nothing is
	// deleted.
	ErrInvalidAge = errors.New("outbox: the age of the rows to delete must be positive")
)

// DefaultTable and DefaultInboxTable are the tables used without WithTable.
const (
	DefaultTable      = "saferetry_outbox"
	DefaultInboxTable = "saferetry_inbox"
)

// Option configures New and NewInbox; options are applied once, in New,
// and may be shared between goroutines.
type Option func(*config)

type config struct {
	table string
}

// WithTable sets the table, optionally schema-qualified ("app.outbox"):
// a lowercase identifier of at most 48 bytes per part, as
// pgstore.ValidateTable accepts. Empty means DefaultTable for New and
// DefaultInboxTable for NewInbox. An Outbox and an Inbox need tables of
// their own.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// tableOf returns the table the options name, def when none, checked.
func tableOf(def string, opts []Option) (string, error) {
	c := config{table: def}
	for _, o := range opts {
		o(&c)
	}
	if c.table == "" {
		c.table = def
	}
	return c.table, validTable(c.table)
}

// Outbox writes messages into a PostgreSQL table in the caller's
// transaction and, through its Relays, publishes them after the commit.
// Create it with New; the zero value is not usable. It is safe for
// concurrent use by multiple goroutines and processes. Most callers want
// Enqueue, inside the transaction that writes the business rows, and one
// Relay per instance.
type Outbox struct {
	pool  *pgxpool.Pool
	names names
}

// New returns an Outbox over pool. It panics when the WithTable name is
// invalid, as a programming error.
func New(pool *pgxpool.Pool, opts ...Option) *Outbox {
	table, err := tableOf(DefaultTable, opts)
	if err != nil {
		panic(err)
	}
	return &Outbox{pool: pool, names: newNames(table)}
}

// Enqueue writes msgs in tx, the caller's transaction: they are published
// if and only if tx commits. A message whose ID is already in the table
// (published or not, until its row is cleaned up) is skipped, so a re-run
// of the same operation adds nothing. An empty ID is derived from the
// protected request ctx belongs to (see Message.ID); two messages of one
// request with the same Topic and Key derive the same ID, so a derived ID
// that an earlier Enqueue of the same transaction wrote is refused
// (ErrInvalidMessage: the second message would otherwise be skipped, and
// lost) rather than skipped. Give such messages IDs of their own. The
// call's other messages are written all the same, and the transaction
// stays usable: roll it back. (A row written under a savepoint of the
// transaction, whose xmin is the savepoint's, is not recognised so.)
//
// To keep each Key in commit order, Enqueue takes a transaction-scoped
// advisory lock per Key: a second transaction enqueueing for the same Key
// waits until the first commits or rolls back. Enqueue all of a
// transaction's Keys in one call (they are locked in a fixed order), or
// in the same order in every transaction: two transactions taking two
// Keys in opposite orders deadlock, and PostgreSQL aborts one of them.
//
// It costs one round trip, and a NOTIFY at commit that wakes the relays.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	topics := make([]string, len(msgs))
	keys := make([]string, len(msgs))
	payloads := make([][]byte, len(msgs))
	headers := make([]string, len(msgs))
	var lockKeys, derived []string
	for i, m := range msgs {
		if m.Topic == "" {
			return fmt.Errorf("%w: message %d has no Topic", ErrInvalidMessage, i)
		}
		id := m.ID
		if id == "" {
			k, ok := idempotency.DerivedKey(ctx, "outbox:"+m.Topic+":"+m.Key)
			if !ok {
				return fmt.Errorf("%w (topic %q)", ErrNoID, m.Topic)
			}
			id = k
			derived = append(derived, k)
		}
		if !headerSafe(id) {
			return fmt.Errorf("%w: message %d: ID %q starts or ends with a space or holds a control character", ErrInvalidMessage, i, id)
		}
		if m.Key != "" && !headerSafe(m.Key) {
			return fmt.Errorf("%w: message %d: Key %q starts or ends with a space or holds a control character", ErrInvalidMessage, i, m.Key)
		}
		if err := storableText(m); err != nil {
			return fmt.Errorf("%w: message %d: %w", ErrInvalidMessage, i, err)
		}
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("%w: ID %q twice in one call", ErrInvalidMessage, id)
		}
		h, err := json.Marshal(m.Headers)
		if err != nil {
			return fmt.Errorf("outbox: headers: %w", err)
		}
		ids[i], topics[i], keys[i], headers[i] = id, m.Topic, m.Key, string(h)
		payloads[i] = m.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		if m.Key != "" {
			lockKeys = append(lockKeys, m.Key)
		}
	}
	var b pgx.Batch
	if len(lockKeys) > 0 {
		slices.Sort(lockKeys)
		b.Queue(o.names.lockKeysSQL, o.names.lockPrefix, slices.Compact(lockKeys))
	}
	if derived == nil {
		derived = []string{}
	}
	b.Queue(o.names.enqueueSQL, ids, topics, keys, payloads, headers, o.names.channel, derived)
	var again []string
	br := tx.SendBatch(ctx, &b)
	err := func() error {
		if len(lockKeys) > 0 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var notified bool
		return br.QueryRow().Scan(&notified, &again)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("outbox: enqueue: %w", err)
	}
	if len(again) > 0 {
		return fmt.Errorf("%w: the ID %q derived for Topic and Key was enqueued already in this transaction "+
			"(another message of the same request with the same Topic and Key, which would be skipped): "+
			"give such messages IDs of their own; the transaction must be rolled back", ErrInvalidMessage, again[0])
	}
	return nil
}

// validTable reports an invalid table name with pgstore's rule.
func validTable(name string) error {
	if err := pgstore.ValidateTable(name); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Table returns the quoted, possibly schema-qualified name of o's table,
// for queries of one's own (inspection, tests).
func (o *Outbox) Table() string { return o.names.quoted }

// storableText reports the first of m's Topic, Key, ID and Headers that is
// not valid UTF-8 or holds NUL: PostgreSQL's text and jsonb columns refuse
// such text, and json.Marshal would write invalid UTF-8 in a header as
// U+FFFD, so the consumer would receive other bytes than were enqueued.
// (An ID derived from the request is a UUID, always storable.)
func storableText(m Message) error {
	for _, f := range [...]struct{ name, s string }{{"ID", m.ID}, {"Topic", m.Topic}, {"Key", m.Key}} {
		if !textSafe(f.s) {
			return fmt.Errorf("%s %q is not valid UTF-8 or holds NUL", f.name, f.s)
		}
	}
	for k, v := range m.Headers {
		if !textSafe(k) || !textSafe(v) {
			return fmt.Errorf("header %q: %q is not valid UTF-8 or holds NUL", k, v)
		}
	}
	return nil
}

// textSafe reports whether s is valid UTF-8 without NUL.
func textSafe(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// headerSafe reports whether s, not empty, travels unchanged as a header
// value: no space at either end, no control character (a tab is one).
func headerSafe(s string) bool {
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
