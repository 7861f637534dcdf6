package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/saferetry/saferetry/internal/pgschema"
)

// Row states of the outbox table.
const (
	statePending   = 0
	statePublished = 1
	stateFailed    = 2
)

// names holds the SQL of one outbox table.
type names struct {
	table      string // as given
	quoted     string
	lock       string // advisory lock of CreateSchema
	lockPrefix string // prefix of the per-Key advisory locks
	channel    string // NOTIFY channel

	schemaSQL, lockKeysSQL, enqueueSQL, publishedSQL, failSQL string
}

func newNames(table string) names {
	q := pgschema.Quote(table, "")
	_, bare := pgschema.Split(table)
	idx := func(suffix string) (quoted, regclass string) {
		return `"` + bare + suffix + `"`, pgschema.Quote(table, suffix)
	}
	sum := sha256.Sum256([]byte(table))
	n := names{
		table:      table,
		quoted:     q,
		lock:       "saferetry/outbox/" + table,
		lockPrefix: "saferetry/outbox/" + table + "/key/",
		// A channel is an identifier (at most 63 bytes): a digest of the
		// table name fits whatever the name's length.
		channel: "saferetry_outbox_" + hex.EncodeToString(sum[:8]),
	}
	pending, pendingReg := idx("_pending_idx")
	byKey, byKeyReg := idx("_key_idx")
	published, publishedReg := idx("_published_idx")
	n.schemaSQL = `CREATE TABLE IF NOT EXISTS ` + q + ` (
	seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text        NOT NULL UNIQUE,
	topic        text        NOT NULL,
	key          text        NOT NULL,
	payload      bytea       NOT NULL,
	headers      jsonb,
	state        smallint    NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2)),
	attempts     integer     NOT NULL DEFAULT 0,
	last_error   text,
	created_at   timestamptz NOT NULL DEFAULT now(),
	next_try_at  timestamptz NOT NULL DEFAULT now(),
	published_at timestamptz
);
DO $$
BEGIN
	IF to_regclass('` + pendingReg + `') IS NULL THEN
		CREATE INDEX ` + pending + ` ON ` + q + ` (seq) WHERE state = 0;
	END IF;
	IF to_regclass('` + byKeyReg + `') IS NULL THEN
		CREATE INDEX ` + byKey + ` ON ` + q + ` (key, seq) WHERE state = 0;
	END IF;
	IF to_regclass('` + publishedReg + `') IS NULL THEN
		CREATE INDEX ` + published + ` ON ` + q + ` (published_at) WHERE state = 1;
	END IF;
END
$$;
`
	n.lockKeysSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || k, 0)) FROM unnest($2::text[]) AS k`
	// The insert, the NOTIFY when it inserted anything, and the derived
	// IDs ($7) that an earlier statement of this transaction enqueued
	// already: the rows the statement's snapshot shows with the
	// transaction's own xmin (the rows it inserts itself are not in that
	// snapshot). Such an ID is another message of the same request with
	// the same Topic and Key, which the insert would skip.
	n.enqueueSQL = `WITH ins AS (
	INSERT INTO ` + q + ` (id, topic, key, payload, headers)
	SELECT i, t, k, p, h::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS u(i, t, k, p, h)
	ON CONFLICT (id) DO NOTHING
	RETURNING 1
)
SELECT (SELECT pg_notify($6, '') WHERE EXISTS (SELECT FROM ins)) IS NOT NULL,
	ARRAY(SELECT id FROM ` + q + ` WHERE id = ANY($7::text[]) AND xmin = pg_catalog.pg_current_xact_id()::xid)`
	// Both marks read clock_timestamp(), the time of the mark, not now(),
	// the start of the transaction that claimed the batch before it was
	// published: a publication that took longer than the backoff would
	// otherwise be retried at once, and retention would count from the
	// claim.
	n.publishedSQL = `UPDATE ` + q + ` SET state = 1, published_at = clock_timestamp() WHERE seq = ANY($1)`
	// A failed batch: each row's attempt is counted and its next try put
	// off (min * 2^attempts, capped) from the failure; past the limit the
	// row is failed.
	// The exponent is capped too: 2^1024 overflows a float8, and the mark
	// would fail for ever under a limit meant as "retry for ever".
	n.failSQL = `UPDATE ` + q + ` SET attempts = attempts + 1, last_error = $2,
	state = CASE WHEN attempts + 1 >= $5 THEN 2 ELSE 0 END,
	next_try_at = clock_timestamp() + make_interval(secs => least($3::float8 * power(2, least(attempts, 64)), $4::float8))
WHERE seq = ANY($1)`
	return n
}

// Schema returns the SQL that creates the outbox table named table (see
// WithTable) and its indexes, for migration tools; it is safe to run
// again. It returns an error wrapping pgstore.ErrInvalidTable for an
// invalid name.
//
// Columns: seq orders rows (identity); id is the message ID (unique);
// topic, key, payload and headers (jsonb) are the message; state is 0
// (pending), 1 (published) or 2 (failed); attempts counts failed
// publications, last_error holds the latest one, next_try_at is when a
// pending row may be tried again; published_at is when it was published
// (indexed for cleanup).
func Schema(table string) (string, error) {
	if err := validTable(table); err != nil {
		return "", err
	}
	return newNames(table).schemaSQL, nil
}

// CreateSchema creates the table and its indexes if they do not exist (see
// Schema). It is safe to call repeatedly, and concurrently from several
// processes; a table that exists is not locked.
func (o *Outbox) CreateSchema(ctx context.Context) error {
	if err := pgschema.Apply(ctx, o.pool, o.names.lock, o.names.schemaSQL); err != nil {
		return fmt.Errorf("outbox: create schema: %w", err)
	}
	return nil
}

// claimSQL returns the claim of a relay with the given batch size, which
// looks at the oldest window pending rows; with after, it takes the rows
// whose seq is in $1 (the batch being published) for published; with
// skip, it leaves out the heads of the topics in the next parameter ($2
// with after, else $1: the topics the broker refuses for now, see
// refusals). The limits are literals, not
// parameters, so that the prepared statement's generic plan is made for
// them (a generic plan blind to its limits was seen to take 300 ms a
// claim over 1,000 rows), and no claim pays for planning.
func (n names) claimSQL(batch int, window int64, after, skip bool) string {
	q := n.quoted
	notIn := ""
	if after {
		// A hashed subplan: NOT (seq = ANY($1)) scans the array for each
		// row in a generic plan, seven times slower over 1,000 rows.
		notIn = ` AND seq NOT IN (SELECT unnest($1::bigint[]))`
	}
	// A skipped topic's rows are no heads, so their Keys are not claimed
	// (a Key's later rows never pass its head); its unkeyed rows are no
	// candidates either, as those waiting for their retry are not.
	skipCandidate, skipHead := "", ""
	if skip {
		param := "$1"
		if after {
			param = "$2"
		}
		skipCandidate = ` AND (key <> '' OR topic <> ALL(` + param + `::text[]))`
		skipHead = ` AND topic <> ALL(` + param + `::text[])`
	}
	// The claim: among the oldest window pending rows (a bound on the work of
	// one claim, whatever the number of rows pending), those that are
	// their Key's oldest pending row (its head: a Key's later rows wait
	// behind it, even while it waits for its retry time); of these, the
	// first batch that no other relay holds, locked; then their Keys' later
	// pending rows, oldest first, up to batch rows in all. The oldest pending
	// row is always a head, so a claim finds one unless other relays hold
	// them all.
	//
	// Rows are chosen by state, never by a position in the sequence, so a
	// transaction that commits after a later one is never passed over; and
	// since Enqueue serialises a Key's transactions, a Key's uncommitted
	// rows are always younger than its committed ones. The candidates are
	// a prefix, in sequence order, of the pending rows, so a pending row
	// older than a candidate is a candidate too: a Key's head is its
	// oldest candidate, found by one hashed pass over the candidates (a
	// probe of the Key index per candidate cost three times as much).
	// A head found in the statement's snapshot is still its Key's head
	// when locked if it is still pending then (the lock rechecks): rows
	// older than it were published or failed, and stay so. The rows behind a head are read
	// without a lock: only the relay holding a Key's head touches the
	// Key's pending rows, and not locking them saves a write per row.
	//
	// A pipelined relay claims its next batch while it publishes the one
	// before (see pipeline); that batch's rows are still pending, and are
	// taken for published: the rows behind them are their Keys' heads. The
	// heads of the batch being published are locked, so another relay
	// takes none of their Keys.
	//
	// An unkeyed row waiting for its retry is no candidate: it holds up no
	// Key, and a window full of them (a topic the broker refuses) would
	// hold up every row behind it.
	return `WITH candidates AS (
	SELECT seq, key FROM ` + q + ` WHERE state = 0 AND (key <> '' OR next_try_at <= now())` + skipCandidate + notIn + ` ORDER BY seq LIMIT ` + strconv.FormatInt(window, 10) + `
), heads AS (
	SELECT min(seq) AS seq FROM candidates WHERE key <> '' GROUP BY key
	UNION ALL
	SELECT seq FROM candidates WHERE key = ''
), held AS (
	SELECT seq, key FROM ` + q + `
	WHERE seq IN (SELECT seq FROM heads) AND state = 0 AND next_try_at <= now()` + skipHead + `
	ORDER BY seq
	LIMIT ` + strconv.Itoa(batch) + `
	FOR UPDATE SKIP LOCKED
)
SELECT seq, id, topic, key, payload, headers, attempts FROM ` + q + ` f
WHERE f.state = 0` + notIn + ` AND (f.seq IN (SELECT seq FROM held) OR (f.key <> '' AND f.key IN (SELECT key FROM held WHERE key <> '')))
ORDER BY f.seq
LIMIT ` + strconv.Itoa(batch)
}
