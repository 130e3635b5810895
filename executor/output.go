package executor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hemra-dev/hemra/state"
)

// MaxOutputBytes is how much of each stream of a task command (solve.sh,
// test.sh, setup.sh) is kept: the first 16 MiB, stored as a blob. The
// rest is counted and dropped; the command never blocks on it.
const MaxOutputBytes = 16 << 20

// captureMemBytes is how much of a stream a capture holds in memory
// before it spills to its file: most task commands print a few lines,
// and a file per stream per command would be most of what an attempt
// writes to disk.
const captureMemBytes = 64 << 10

// capture keeps a command's stream, up to max bytes, in memory and, past
// captureMemBytes, in a host file of the attempt's workspace, and its
// last bytes in memory for messages. merged, when set, receives the
// stream too (Harbor's oracle.txt and test-stdout.txt hold stdout and
// stderr together).
type capture struct {
	mu      sync.Mutex
	buf     []byte   // the stream while it fits in memory
	f       *os.File // the stream once it did not; nil when closed
	spilled bool
	path    string
	max     int64
	kept    int64
	dropped int64
	err     error
	tail    *tail
	merged  io.Writer
}

func newCapture(path string, max int64, merged io.Writer) (*capture, error) {
	return &capture{path: path, max: max, tail: &tail{max: tailSize}, merged: merged}, nil
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.tail.Write(p)
	if c.merged != nil {
		_, _ = c.merged.Write(p)
	}
	keep := min(int64(len(p)), c.max-c.kept)
	if keep > 0 && c.err == nil {
		if !c.spilled && int64(len(c.buf))+keep > captureMemBytes {
			c.err = c.spill()
		}
		switch {
		case c.err != nil:
		case c.spilled:
			if _, err := c.f.Write(p[:keep]); err != nil {
				c.err = err
			}
		default:
			c.buf = append(c.buf, p[:keep]...)
		}
		c.kept += keep
	}
	c.dropped += int64(len(p)) - max(keep, 0)
	return len(p), nil
}

// spill moves what is in memory to the capture's file, which takes the
// rest of the stream.
func (c *capture) spill() error {
	c.spilled = true
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	c.f = f
	_, err = f.Write(c.buf)
	c.buf = nil
	return err
}

// close ends the file, if there is one; store then keeps the stream as a
// blob.
func (c *capture) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return c.err
	}
	err := c.f.Close()
	c.f = nil
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// contents ends the capture and returns what it kept (never nil),
// removing its file if it made one.
func (c *capture) contents() []byte {
	_ = c.close()
	if !c.spilled {
		return append([]byte{}, c.buf...)
	}
	defer os.Remove(c.path)
	b, _ := os.ReadFile(c.path)
	if b == nil {
		b = []byte{}
	}
	return b
}

// store keeps the captured bytes as a blob (nil when there were none)
// and removes the file.
func (c *capture) store(st *state.Store) (*state.Output, error) {
	if err := c.close(); err != nil {
		if c.spilled {
			os.Remove(c.path)
		}
		return nil, fmt.Errorf("keeping the output: %w", err)
	}
	if c.kept == 0 && c.dropped == 0 {
		return nil, nil
	}
	if !c.spilled {
		sha, err := st.PutBlob(c.buf)
		if err != nil {
			return nil, fmt.Errorf("storing the output: %w", err)
		}
		return &state.Output{SHA256: sha, Size: int64(len(c.buf)), Dropped: c.dropped}, nil
	}
	defer os.Remove(c.path)
	sha, size, err := st.PutBlobFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("storing the output: %w", err)
	}
	return &state.Output{SHA256: sha, Size: size, Dropped: c.dropped}, nil
}

// lockedWriter serialises writes of two streams into one file.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// cappedFile writes at most max bytes to a file and drops the rest.
type cappedFile struct {
	f   *os.File
	n   int64
	max int64
}

func (c *cappedFile) Write(p []byte) (int, error) {
	keep := min(int64(len(p)), c.max-c.n)
	if keep > 0 {
		if _, err := c.f.Write(p[:keep]); err != nil {
			return 0, err
		}
		c.n += keep
	}
	return len(p), nil
}
