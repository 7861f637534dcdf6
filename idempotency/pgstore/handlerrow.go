package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// queryRow runs the statement of the handler's QueryRow on tx to its end,
// and returns its first row, read: the caller holds the lock of the
// request's Tx (handlerTx.lock), and lets it go when queryRow returns.
// pgx's own QueryRow returns once the server sent the row's description,
// and its Scan reads the rest of the statement, with its end; a Scan of a
// handler's goroutine then read the connection while the request's Commit
// ran on it ("conn busy", and the client got 503). The row is scanned as
// pgx's would be, errors of the statement after its first row included.
func queryRow(ctx context.Context, tx pgx.Tx, sql string, args ...any) pgx.Row {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		rows.Close()
		return failedRows{err}
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return failedRows{err}
		}
		return failedRows{pgx.ErrNoRows}
	}
	r := &readRow{
		typeMap: rows.Conn().TypeMap(),
		fields:  slices.Clone(rows.FieldDescriptions()),
		values:  make([][]byte, len(rows.RawValues())),
	}
	for i, v := range rows.RawValues() {
		if v != nil {
			r.values[i] = slices.Clone(v)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return failedRows{err}
	}
	r.tag = rows.CommandTag()
	return r
}

// readRow is the first row of a statement that ran to its end (queryRow):
// a pgx.Row, and the pgx.Rows a pgx.RowScanner given to its Scan reads.
type readRow struct {
	typeMap *pgtype.Map
	fields  []pgconn.FieldDescription
	values  [][]byte
	tag     pgconn.CommandTag
}

func (r *readRow) Scan(dest ...any) error {
	if len(dest) == 1 {
		if rs, ok := dest[0].(pgx.RowScanner); ok {
			return rs.ScanRow(r)
		}
	}
	for _, d := range dest {
		if _, ok := d.(*pgtype.DriverBytes); ok {
			return errors.New("cannot scan into *pgtype.DriverBytes from QueryRow")
		}
	}
	return pgx.ScanRow(r.typeMap, r.fields, r.values, dest...)
}

func (*readRow) Close()                                         {}
func (*readRow) Err() error                                     { return nil }
func (r *readRow) CommandTag() pgconn.CommandTag                { return r.tag }
func (r *readRow) FieldDescriptions() []pgconn.FieldDescription { return r.fields }
func (*readRow) Next() bool                                     { return false }
func (r *readRow) RawValues() [][]byte                          { return r.values }
func (*readRow) Conn() *pgx.Conn                                { return nil }
func (r *readRow) TypeMap() *pgtype.Map                         { return r.typeMap }

// Values decodes the row as pgx's Rows.Values does.
func (r *readRow) Values() ([]any, error) {
	values := make([]any, len(r.fields))
	for i, fd := range r.fields {
		buf := r.values[i]
		if buf == nil {
			continue
		}
		if dt, ok := r.typeMap.TypeForOID(fd.DataTypeOID); ok {
			v, err := dt.Codec.DecodeValue(r.typeMap, fd.DataTypeOID, fd.Format, buf)
			if err != nil {
				return nil, err
			}
			values[i] = v
			continue
		}
		switch fd.Format {
		case pgx.TextFormatCode:
			values[i] = string(buf)
		case pgx.BinaryFormatCode:
			values[i] = slices.Clone(buf)
		default:
			return nil, fmt.Errorf("unknown format code %d", fd.Format)
		}
	}
	return values, nil
}
