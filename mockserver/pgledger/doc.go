// Package pgledger keeps a mockserver.Ledger in PostgreSQL, so that every
// cmd/mockserver process over one database answers from the same payments
// and balances, and a payment made by a process that died is not lost. Its
// Ledger is a mockserver.TxLedger: next to a pgstore.TxStore it makes the
// Server run in transactional mode, where the claim, the payment and the
// stored answer commit together. Most callers want:
//
//	store := pgstore.NewTx(pool)
//	ledger := pgledger.New(pool, store.Table(), nil)
//	// at start-up: store.CreateSchema(ctx), ledger.CreateSchema(ctx)
//	srv := mockserver.New(mockserver.WithStore(store), mockserver.WithLedger(ledger))
//
// # Tables
//
// A ledger named T (see New) is two tables, which Schema creates:
//
//	T_payments  one row per payment, ref UNIQUE, ordered by seq
//	T_balances  one row per currency paid in: its balance
//
// A currency without a row has its opening balance, given to New; the row
// appears with the currency's first payment, so processes must agree on the
// opening balances.
//
// # Pay
//
// Pay is two SQL statements after a transaction-scoped advisory lock on
// the ref. The first retires a payment whose ref lapsed (created keep or
// more before the new one, see mockserver.Ledger.Pay): its ref becomes ref
// + "/lapsed/" + its ID, which it reports as its Ref from then on, so that
// the ref column stays unique and names the one payment the ref finds. The
// second reads the payment under the ref and, only if there is none,
// debits the balance (an upsert that creates the currency's row from the
// opening balance, or updates it, only while the balance covers the amount)
// and inserts the payment, all in one snapshot. The lock makes a second
// transaction paying under the same ref at the same moment (a takeover
// racing the paused run it took over) wait for the first to end, so that
// its statement then finds the first one's payment. The ref's unique
// constraint is the backstop should the lock be skipped: the later insert
// fails, which aborts its transaction, debit included. A refused payment
// debits and records nothing; it may have retired a lapsed ref, which
// finds nothing either way.
//
// Pay runs in the transaction that pgstore.TxFromContext finds in its
// context, when the Middleware runs in transactional mode, and leaves
// commit and rollback to the Middleware; the ledger's tables must then be
// in the database of the pgstore.TxStore's pool. Otherwise it runs in a
// READ COMMITTED transaction of its own. Either way it costs one round trip
// (BEGIN, lock, both statements and COMMIT go in one pgx batch), and a
// crash at any instant leaves the whole payment or nothing.
//
// # Connection poolers
//
// Behind a transaction pooler (PgBouncer's pool_mode=transaction) the
// Ledger refuses the exec modes the pooler breaks, as a pgstore.Store
// does: in pgx's default mode, the statement cache, and in
// QueryExecModeDescribeExec it looks for a pooler once, before its first
// statement, and behind one every method returns a *pgstore.ExecModeError.
// Put default_query_exec_mode=exec in the URL there, or declare the pooler
// with WithPooler.
package pgledger
