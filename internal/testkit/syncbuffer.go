package testkit

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer for output written by other goroutines (a
// logger's, a child process's) and read by the test. Its zero value is an
// empty buffer ready to use; it is safe for simultaneous use by multiple
// goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
