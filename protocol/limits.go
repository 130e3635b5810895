package protocol

import (
	"errors"
	"io"
	"sync"
)

// The pieces below let other relays of an attempt's traffic (the MCP
// relay) apply the protocol's limits the same way: lines of bounded
// length never held whole when over the limit, and a bounded stderr tail.

// LineReader reads newline-terminated lines of at most a limit.
type LineReader struct{ lr *lineReader }

// NewLineReader reads lines of at most max bytes from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{newLineReader(r, max)}
}

// Next returns the next line, without its newline, in a fresh slice the
// caller may keep. A line over the limit is an error for which
// IsLineTooLong is true; the rest of it is still unread.
func (l *LineReader) Next() ([]byte, error) { return l.lr.next() }

// Discard reads and drops everything left.
func (l *LineReader) Discard() { l.lr.discard() }

// IsLineTooLong reports whether err is a LineReader's over-the-limit error.
func IsLineTooLong(err error) bool {
	var e *lineTooLongError
	return errors.As(err, &e)
}

// Tail keeps the last bytes written to it, safe for one writer and
// concurrent readers.
type Tail struct {
	mu sync.Mutex
	t  tailBuffer
}

// NewTail keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{t: tailBuffer{max: max}} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.t.Write(p)
}

// String is the tail, from a line boundary when older output was dropped.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.t.String()
}

// LastLine is the last non-empty line, cut to n bytes.
func (t *Tail) LastLine(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.t.lastLine(n)
}

// FormatBytes writes a size as the limits are written ("1 MiB").
func FormatBytes(n int64) string { return formatBytes(n) }
