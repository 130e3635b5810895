package protocol

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// lineTooLongError is returned for a line over the limit. The line is not
// kept: hemra never holds more than the limit of one line in memory.
type lineTooLongError struct {
	limit int
}

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("line longer than the %s limit", formatBytes(int64(e.limit)))
}

// lineReader reads newline-terminated lines of at most max bytes. It reads
// through a fixed bufio buffer and accumulates at most max+1 bytes, so an
// endless line costs bounded memory.
type lineReader struct {
	r   *bufio.Reader
	max int
}

func newLineReader(r io.Reader, max int) *lineReader {
	size := 64 << 10
	if max+1 < size {
		size = max + 1
	}
	return &lineReader{r: bufio.NewReaderSize(r, size), max: max}
}

// next returns the next line without its "\n" (or "\r\n"). A last line
// without a newline is returned as a line; io.EOF follows it.
func (lr *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n := len(line) + len(chunk)
		if err == nil {
			n-- // the newline does not count
		}
		if n > lr.max {
			return nil, &lineTooLongError{limit: lr.max}
		}
		line = append(line, chunk...)
		switch err {
		case nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) > 0 {
				return bytes.TrimSuffix(line, []byte("\r")), nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// discard reads and drops everything left, so a writer that is still
// going never blocks on a full pipe.
func (lr *lineReader) discard() {
	_, _ = io.Copy(io.Discard, lr.r)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max       int
	buf       []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		t.truncated = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the tail, starting at a line boundary when it was cut.
func (t *tailBuffer) String() string {
	b := t.buf
	if t.truncated {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// lastLine returns the last non-empty line of the tail, cut to n bytes.
func (t *tailBuffer) lastLine(n int) string {
	b := bytes.TrimRight(t.buf, "\r\n\t ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return clip(b, n)
}

// clip shortens b to at most n bytes for a message, saying how long it was.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:n], len(b))
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
