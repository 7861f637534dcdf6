package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/saferetry/saferetry/internal/pgtext"
)

// writtenHereSQL holds for a row of the table that the transaction
// running the statement wrote last: the claim's row, inserted (or taken
// over) by the claim in the transaction that the handler continues. A
// handler that ended that transaction and began another in one go
// ("COMMIT; BEGIN" in one query string, COMMIT AND CHAIN, a batch of the
// two, the two through the transaction's Conn) leaves the transaction
// status in a block, so that nothing in it tells the switch, but the
// row's xmin is then another transaction's id. That id is the
// transaction's own (pg_current_xact_id, PostgreSQL 13's) for a claim
// made at its top level, as the Middleware's is; a claim made while a
// savepoint was open (a Tx whose Context was taken first, with a
// savepoint of the handler's or its LargeObjects') has a subtransaction's
// id, which stays the row's xmin after the savepoint's release. So a row
// whose xmin is not the transaction's own is still this transaction's
// when that xmin is in progress (pg_xact_status, given the xid with the
// epoch of the transaction's own, within 2^31 of which every xmin lies):
// a row that the statement sees, written by a transaction in progress,
// was written by its own transaction or one of its subtransactions. The
// row of a switch was written by a transaction that committed, and so is
// the row that another's statement changed since (a waiting retry's
// watch). xmin 1 and 2 (bootstrap, frozen) are committed. The second
// test runs only where the first fails, but the server compiles both at
// every execution (a generic plan's expressions are compiled per
// execution), so the second is written with few nodes: txid_current and
// txid_status are pg_current_xact_id and pg_xact_status over bigint (the
// same C functions), which spare the casts through text that xid8 needs.
const writtenHereSQL = `(xmin = pg_catalog.pg_current_xact_id()::xid OR xmin::text::bigint > 2 AND pg_catalog.txid_status(pg_catalog.txid_current()
		+ (xmin::text::bigint - pg_catalog.txid_current() % 4294967296 + 6442450944) % 4294967296 - 2147483648) = 'in progress')`

// switchedText is what the txComplete statement casts to integer, to fail
// (see sqlstateInvalidText), when the claim's row was written by another
// transaction than the one completing it (see writtenHereSQL).
const switchedText = "pgstore: the claim was committed or rolled back by the handler, in another transaction than the one completing it"

// switchingTag reports whether tag, the tag of the last statement that a
// handler sent through its transaction, is one of the statements that end
// a transaction block (COMMIT, END, ROLLBACK, ABORT; with AND CHAIN, the
// status stays in a block) or begin one (BEGIN, START TRANSACTION: inside
// the request's block PostgreSQL ignores them, after a COMMIT in the same
// query string they begin another). ROLLBACK TO SAVEPOINT has the tag
// ROLLBACK too.
func switchingTag(tag pgconn.CommandTag) bool {
	return tag.String() == "COMMIT" || tag.String() == "ROLLBACK" || tag.String() == "BEGIN" || tag.String() == "START TRANSACTION"
}

// checkTag runs after a statement of the handler that returned tag and
// err, with lk held, and returns err or what checkBlock makes of it; a tag
// of transaction control (switchingTag) on a block still open costs a
// round trip: blockSwitched. A switch is treated as a statement that ended
// the block (see ErrHandlerEndedTx): the new block, with what ran in it,
// is rolled back, what the first committed is recorded, and every later
// statement is refused. The check and what follows run under ctx without
// its cancellation, bounded by twice the lock timeout (as settleCutShort's
// wait): the handler's context, ending just after its statement, would
// fail the check unsent, or cut it short and close the connection, and
// leave a claim that the statement committed for a retry to take over and
// run again. Should the check fail all the same, the Tx is marked suspect,
// so that its Rollback looks (rollbackChecked). After a DEALLOCATE, the
// prepared statement it names, or all, are forgotten (see forgetPrepared); after a SET of
// the session, sql, the connection is marked to be closed at the end
// (see setsSession).
func (t *Tx) checkTag(ctx context.Context, tag pgconn.CommandTag, sql string, err error) error {
	if err == nil && deallocatingTag(tag) {
		name := ""
		if tag.String() == "DEALLOCATE" {
			name = deallocatedName(sql)
		}
		err = t.forgetPrepared(ctx, name)
	}
	if err == nil && setsSession(tag, sql) {
		t.sessionSet = true
	}
	if err != nil || t.blockEnded || !switchingTag(tag) || t.pgxConn.PgConn().TxStatus() != 'T' {
		return t.checkBlock(ctx, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*t.store.cfg.lockTimeout)
	defer cancel()
	switched, serr := t.blockSwitched(ctx)
	if serr != nil {
		t.suspect.Store(true)
		return serr
	}
	if !switched {
		return nil
	}
	return t.endSwitched(ctx, nil)
}

// blockSwitched reports whether the transaction block open on the Tx's
// connection is not the one that holds its claim (see writtenHereSQL), in
// one round trip. A Tx without a claim (its Context was taken before any)
// has nothing to tell it by: it answers false.
func (t *Tx) blockSwitched(ctx context.Context) (bool, error) {
	if t.token == 0 {
		return false, nil
	}
	var held bool
	err := t.pgxConn.QueryRow(ctx, t.store.sql.txHeld, pgtext.Encode(t.claimed.Scope), pgtext.Encode(t.claimed.Key), t.token).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("pgstore: checking the transaction after the handler's transaction control: %w", err)
	}
	return !held, nil
}

// endSwitched ends the Tx whose block a statement of the handler ended and
// replaced by another (see writtenHereSQL): it rolls the new block back,
// with whatever ran in it, and treats the rest as a block the handler
// ended (checkBlock): the claim, if the handler's statement committed it,
// is recorded as completed but not replayable, and the error wraps
// ErrHandlerEndedTx and err. Its caller holds lk.
func (t *Tx) endSwitched(ctx context.Context, err error) error {
	if rerr := t.tx.Rollback(ctx); rerr != nil {
		return fmt.Errorf("%w: rolling back the transaction it began: %w", ErrHandlerEndedTx, rerr)
	}
	return t.checkBlock(ctx, err)
}

// rollbackChecked rolls the transaction block back, then looks whether the
// claim stands committed in progress all the same (one round trip more): a
// statement of the handler that ended the block and began another, and was
// not caught (a batch of the two, a query string ending with another
// statement, the Conn: see TxFromContext), committed it, and the rollback
// undid only the block it began. Such a claim is recorded as completed but
// not replayable (see ErrHandlerEndedTx), rather than left for a retry to
// take over and run again. Rollback asks it only of a Tx whose handler
// sent something that may have done that (see Tx.suspect). Its caller
// holds lk.
func (t *Tx) rollbackChecked(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil {
		return err
	}
	var left bool
	if err := t.pgxConn.QueryRow(ctx, t.store.sql.txLeft, pgtext.Encode(t.claimed.Scope), pgtext.Encode(t.claimed.Key), t.token).Scan(&left); err != nil {
		return fmt.Errorf("pgstore: checking the claim after the handler's transaction control: %w", err)
	}
	if !left {
		return nil
	}
	t.blockEnded = true
	return t.recordEnded(ctx)
}

// suspectSQL marks the Tx suspect (see Tx.suspect) when sql may hold
// several statements.
func (t *Tx) suspectSQL(sql string) {
	if strings.IndexByte(sql, ';') >= 0 {
		t.suspect.Store(true)
	}
}
