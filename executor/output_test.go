package executor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hemra-dev/hemra/state"
)

// A capture holds a short stream in memory (no file) and spills a long
// one to its file, keeping every byte up to its cap either way; its
// contents and its blob are the stream as written.
func TestCaptureMemoryThenFile(t *testing.T) {
	st, err := state.Open(t.TempDir(), state.Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	for _, tc := range []struct {
		name        string
		size, max   int64
		wantFile    bool
		wantKept    int64
		wantDropped int64
	}{
		{"short", 1024, MaxOutputBytes, false, 1024, 0},
		{"long", 3 * captureMemBytes, MaxOutputBytes, true, 3 * captureMemBytes, 0},
		{"capped", 2 * captureMemBytes, captureMemBytes + 10, true, captureMemBytes + 10, captureMemBytes - 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name, "0.stdout")
			var merged bytes.Buffer
			c, _ := newCapture(path, tc.max, &merged)
			data := bytes.Repeat([]byte("0123456789abcdef"), int(tc.size/16))
			for i := 0; i < len(data); i += 4096 {
				c.Write(data[i:min(i+4096, len(data))])
			}
			if _, err := os.Stat(path); (err == nil) != tc.wantFile {
				t.Errorf("file made: %v, want %v", err == nil, tc.wantFile)
			}
			if !bytes.Equal(merged.Bytes(), data) {
				t.Errorf("merged got %d bytes, want all %d", merged.Len(), len(data))
			}
			out, err := c.store(st)
			if err != nil {
				t.Fatal(err)
			}
			if out.Size != tc.wantKept || out.Dropped != tc.wantDropped {
				t.Errorf("kept %d dropped %d, want %d and %d", out.Size, out.Dropped, tc.wantKept, tc.wantDropped)
			}
			b, err := st.Blob(out.SHA256)
			if err != nil || !bytes.Equal(b, data[:tc.wantKept]) {
				t.Errorf("blob: %d bytes, %v; want the first %d bytes of the stream", len(b), err, tc.wantKept)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("the capture's file is still there after store")
			}
		})
	}
	c, _ := newCapture(filepath.Join(dir, "m", "merged"), MaxOutputBytes, nil)
	c.Write([]byte("hello"))
	if got := c.contents(); string(got) != "hello" {
		t.Errorf("contents = %q", got)
	}
	e, _ := newCapture(filepath.Join(dir, "e", "merged"), MaxOutputBytes, nil)
	if got := e.contents(); got == nil || len(got) != 0 {
		t.Errorf("contents of nothing = %#v, want empty, not nil", got)
	}
}
