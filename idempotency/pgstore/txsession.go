package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// setsSession reports whether a statement of the handler, sql, which ran
// with tag (empty in a batch, whose tags the Tx does not see), may have
// changed a setting of the session beyond the transaction: a SET or RESET
// (by its tag, or its first word) other than SET LOCAL, SET TRANSACTION
// and SET CONSTRAINTS. Committed with the request, such a setting (search_path,
// statement_timeout, a role, or one that AfterConnect set, reset) would
// stay on the connection for whatever the pool hands it to next; the Tx
// closes that connection instead (see Tx.release). It errs on the side of
// yes for a query string of several statements. It sends nothing: the
// normal path costs a comparison of the tag. A set_config(..., false) or
// a SET run inside a function is not seen, nor a statement sent through
// the transaction's Conn.
func setsSession(tag pgconn.CommandTag, sql string) bool {
	first, second := leadingWords(sql)
	if tag.String() != "SET" && tag.String() != "RESET" && first != "set" && first != "reset" {
		return false
	}
	if strings.IndexByte(strings.TrimRight(sql, "; \t\r\n"), ';') >= 0 {
		return true // several statements
	}
	return first != "set" || second != "local" && second != "transaction" && second != "constraints"
}

// leadingWords returns the first two words of sql, in lower case, past
// white space and comments; "" for one that is not there.
func leadingWords(sql string) (first, second string) {
	first, sql = nextWord(sql)
	second, _ = nextWord(sql)
	return strings.ToLower(first), strings.ToLower(second)
}

// nextWord returns the word that sql begins with, past white space and
// comments ("" for none), as it is written, and the rest of sql.
func nextWord(sql string) (word, rest string) {
	sql = skipSpaceAndComments(sql)
	n := 0
	for n < len(sql) && isWordByte(sql[n]) {
		n++
	}
	return sql[:n], sql[n:]
}

// skipSpaceAndComments returns sql past its leading white space and
// comments (-- to the end of the line, and /* */, not nested).
func skipSpaceAndComments(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n\f")
		switch {
		case strings.HasPrefix(sql, "--"):
			i := strings.IndexByte(sql, '\n')
			if i < 0 {
				return ""
			}
			sql = sql[i+1:]
		case strings.HasPrefix(sql, "/*"):
			i := strings.Index(sql, "*/")
			if i < 0 {
				return ""
			}
			sql = sql[i+2:]
		default:
			return sql
		}
	}
}

// closeConn takes c out of the pool and closes it, bounded by a second:
// PostgreSQL rolls back what it had open, and ends the session with
// whatever was set in it.
func closeConn(c *pgxpool.Conn) {
	pc := c.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Close(ctx)
}
