package jetstream_test

import (
	"context"
	"log/slog"
	"sync"
)

// logRecords is a slog.Handler that keeps what is logged, for the tests of
// what Consume tells an operator. Consume adds no attributes or groups to
// its logger, so WithAttrs and WithGroup return the handler itself.
type logRecords struct {
	mu   sync.Mutex
	recs []logged
}

// logged is one record kept by logRecords.
type logged struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (l *logRecords) logger() *slog.Logger { return slog.New(l) }

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	rec := logged{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

// find returns the records logged with message msg.
func (l *logRecords) find(msg string) []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logged
	for _, r := range l.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// all returns every record logged, for a failure message.
func (l *logRecords) all() []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logged(nil), l.recs...)
}

// errAttr returns r's attribute "err" as an error, nil if it has none.
func (r logged) errAttr() error {
	e, _ := r.attrs["err"].Any().(error)
	return e
}

// str returns r's attribute key as a string ("" if it has none).
func (r logged) str(key string) string {
	v, ok := r.attrs[key]
	if !ok {
		return ""
	}
	return v.String()
}
