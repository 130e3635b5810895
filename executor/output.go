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

// capture keeps a command's stream in a host file of the attempt's
// workspace, up to max bytes, and its last bytes in memory for messages.
// merged, when set, receives the stream too (Harbor's oracle.txt and
// test-stdout.txt hold stdout and stderr together).
type capture struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	max     int64
	kept    int64
	dropped int64
	err     error
	tail    *tail
	merged  io.Writer
}

func newCapture(path string, max int64, merged io.Writer) (*capture, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	return &capture{f: f, path: path, max: max, tail: &tail{max: tailSize}, merged: merged}, nil
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
		if _, err := c.f.Write(p[:keep]); err != nil {
			c.err = err
		}
		c.kept += keep
	}
	c.dropped += int64(len(p)) - max(keep, 0)
	return len(p), nil
}

// close ends the file; store then keeps it as a blob.
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

// store keeps the captured bytes as a blob (nil when there were none)
// and removes the file.
func (c *capture) store(st *state.Store) (*state.Output, error) {
	if err := c.close(); err != nil {
		return nil, fmt.Errorf("keeping the output: %w", err)
	}
	defer os.Remove(c.path)
	if c.kept == 0 && c.dropped == 0 {
		return nil, nil
	}
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
