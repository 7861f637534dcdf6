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
// closes that connection instead (see Tx.release). In a query string of
// several statements it looks at the first words of each (the tag is the
// last one's), and errs on the side of yes (a semicolon in a string or a
// comment). It sends nothing and allocates nothing: the normal path costs
// a look at the first word. A set_config(..., false) or a SET run inside
// a function is not seen, nor a statement sent through the transaction's
// Conn.
func setsSession(tag pgconn.CommandTag, sql string) bool {
	byTag := tag.String() == "SET" || tag.String() == "RESET"
	sql = strings.TrimRight(sql, "; \t\r\n")
	if strings.IndexByte(sql, ';') < 0 {
		return setsSessionWords(sql, byTag)
	}
	if byTag {
		return true
	}
	for stmt := range strings.SplitSeq(sql, ";") {
		if setsSessionWords(stmt, false) {
			return true
		}
	}
	return false
}

// setsSessionWords reports whether stmt, one statement, changes a setting
// of the session by its first words (see setsSession), and, when it does
// not begin with SET or RESET, byTag.
func setsSessionWords(stmt string, byTag bool) bool {
	first, rest := nextWord(stmt)
	switch {
	case strings.EqualFold(first, "reset"):
		return true
	case strings.EqualFold(first, "set"):
		second, _ := nextWord(rest)
		return !strings.EqualFold(second, "local") && !strings.EqualFold(second, "transaction") && !strings.EqualFold(second, "constraints")
	}
	return byTag
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
