package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// sqlstateUnprepared is PostgreSQL's invalid_sql_statement_name: the
// statement named in a Bind does not exist, which is what a statement
// that the Tx prepared (see Tx.prepare) fails with once a DEALLOCATE on
// its connection dropped it, pgx still counting it prepared.
const sqlstateUnprepared = "26000"

// isUnprepared reports whether one of errs is sqlstateUnprepared.
func isUnprepared(errs ...error) bool { return anySQLState(sqlstateUnprepared, errs) }

// deallocatingTag reports whether tag is DEALLOCATE's: of one prepared
// statement, or of all.
func deallocatingTag(tag pgconn.CommandTag) bool {
	return tag.String() == "DEALLOCATE" || tag.String() == "DEALLOCATE ALL"
}

// forgetPrepared makes the prepared statements of the Tx's connection
// match what pgx counts on again, after a DEALLOCATE that pgx did not
// send (a handler's, through its transaction or its Conn): after that of
// one statement, which PostgreSQL knows as name, it makes pgx forget that
// one only (forgetOne), so that the handler's others, of pgx or of
// PREPARE, stay usable. With name "" (a DEALLOCATE ALL, or one that
// deallocatedName cannot read) it drops them all, on both sides
// (pgx.Conn.DeallocateAll), and the Tx prepares its own again on their
// next use (Tx.prepare), as pgx does with its statement cache. One round
// trip, which fails in a transaction that failed.
func (t *Tx) forgetPrepared(ctx context.Context, name string) error {
	var err error
	if name != "" {
		err = t.forgetOne(ctx, name)
	} else {
		err = t.pgxConn.DeallocateAll(ctx)
	}
	if err != nil {
		return fmt.Errorf("pgstore: forgetting the prepared statements that a DEALLOCATE dropped: %w", err)
	}
	return nil
}

// forgetOne makes pgx forget the prepared statement that PostgreSQL knows
// as name, which a DEALLOCATE dropped: one of the Tx's own (prepared under
// their text, which pgx names after its hash: see pgxStatementName) or one
// of the handler's (pgx.Tx.Prepare, under name). The Tx's own are found by
// their names, not by preparing them: a connection has prepared only the
// statements of the claims it ran (see Tx.prepare), and the others would
// be parsed here, each in a round trip, inside the handler's transaction
// and under its settings (a SET LOCAL search_path without the table fails
// them, and the transaction with them). After one that pgx named
// itself for the handler (stmtcache_..., stmt_...), it forgets them all
// (pgx.Conn.DeallocateAll). pgx's Deallocate sends a Close
// message for it, which PostgreSQL answers without an error for a
// statement that is gone, or that pgx never prepared (PREPARE's).
func (t *Tx) forgetOne(ctx context.Context, name string) error {
	if sql, ok := t.store.statementNames[name]; ok && t.store.cacheStatements {
		return t.pgxConn.Deallocate(ctx, sql) // pgx keys it by its text
	}
	if strings.HasPrefix(name, "stmt_") || strings.HasPrefix(name, "stmtcache_") {
		// A name that pgx gave a statement of the handler's, of its
		// statement cache or prepared under its text, which pgx keys by
		// that text, not the name: the name cannot tell pgx which to
		// forget, so it forgets them all.
		return t.pgxConn.DeallocateAll(ctx)
	}
	return t.pgxConn.Deallocate(ctx, name)
}

// pgxStatementName returns the name under which pgx prepares sql on a
// connection when it is prepared under its own text, as Tx.prepare does
// (pgx.Conn.Prepare with name sql): "stmt_" and the hex of the first 24
// bytes of its SHA-256. TestPgxStatementName checks it against pgx.
func pgxStatementName(sql string) string {
	sum := sha256.Sum256([]byte(sql))
	return "stmt_" + hex.EncodeToString(sum[:24])
}

// maxIdentifierLen is the length past which PostgreSQL truncates an
// identifier (NAMEDATALEN - 1).
const maxIdentifierLen = 63

// deallocatedName returns the name of the prepared statement that sql, a
// DEALLOCATE of one ("DEALLOCATE [PREPARE] name"), drops, as PostgreSQL
// reads it (folded to lower case unless quoted), or "" when it cannot
// tell: several statements, a name that PostgreSQL would truncate, or a
// form it does not read (U&"...").
func deallocatedName(sql string) string {
	word, rest := nextWord(sql)
	if !strings.EqualFold(word, "deallocate") {
		return ""
	}
	if word, after := nextWord(rest); strings.EqualFold(word, "prepare") && strings.Trim(skipSpaceAndComments(after), "; \t\r\n") != "" {
		rest = after
	}
	rest = skipSpaceAndComments(rest)
	var name string
	if strings.HasPrefix(rest, `"`) {
		end := 1
		for {
			i := strings.IndexByte(rest[end:], '"')
			if i < 0 {
				return ""
			}
			end += i + 1
			if !strings.HasPrefix(rest[end:], `"`) {
				break
			}
			end++ // a doubled quote
		}
		name, rest = strings.ReplaceAll(rest[1:end-1], `""`, `"`), rest[end:]
	} else {
		name, rest = nextWord(rest)
		name = lowerASCII(name)
	}
	if name == "" || len(name) > maxIdentifierLen || strings.Trim(skipSpaceAndComments(rest), "; \t\r\n") != "" {
		return ""
	}
	return name
}

// lowerASCII folds the ASCII letters of s to lower case, as PostgreSQL
// folds an identifier that is not quoted.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// discardConn closes the connection of a Tx whose prepared statements may
// not match pgx's count of them any more (a statement failed with
// sqlstateUnprepared in a transaction that it failed, where forgetPrepared
// cannot run), rather than return it to the pool, where every request of
// the store on it would fail the same way. Its caller holds lk, and it
// ends the Tx (see release).
func (t *Tx) discardConn() {
	t.finished = true
	if t.h != nil {
		t.h.ended.Store(true)
	}
	if c := t.takeConn(); c != nil {
		closeConn(c)
	}
}
