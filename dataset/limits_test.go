package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manyKeys is a task.toml of n keys, each as short as TOML allows.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString("[metadata]\n")
	for i := range n {
		fmt.Fprintf(&b, "k%d=1\n", i)
	}
	return []byte(b.String())
}

// TestTaskTOMLEntriesCapped: go-toml's decoder takes time in the square of
// a file's keys (100,000 keys: 42 s). A task.toml of more than
// MaxTaskTOMLEntries keys is refused at the first key too many, counted in
// one linear pass before the decoder sees it; MaxTaskTOMLEntries keys are
// read.
func TestTaskTOMLEntriesCapped(t *testing.T) {
	src := manyKeys(110000) // just under 1 MiB
	if len(src) > MaxTaskTOML {
		t.Fatalf("%d bytes: the test means to stay under the size limit", len(src))
	}
	_, diags := ParseTaskConfig("task.toml", src)
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "more than 2048 keys and tables") || diags[0].Subject.Start.Line != MaxTaskTOMLEntries+1 {
		t.Errorf("110,000 keys: %v, want one diagnostic at the key too many (line %d)", diags, MaxTaskTOMLEntries+1)
	}
	if _, diags := ParseTaskConfig("task.toml", manyKeys(MaxTaskTOMLEntries-1)); diags.HasErrors() {
		t.Errorf("%d keys: %v", MaxTaskTOMLEntries-1, diags)
	}
	inline := "x = [" + strings.Repeat("{a=1},", MaxTaskTOMLEntries) + "]\n"
	if _, diags := ParseTaskConfig("task.toml", []byte(inline)); !diags.HasErrors() {
		t.Errorf("an array of %d inline tables was read", MaxTaskTOMLEntries)
	}
}

// TestKeptTaskFilesCapped: task.toml, instruction.md and the Dockerfile
// are read into memory, so each has a size limit, checked before a byte is
// read (the instruction here is a sparse 3 GiB file).
func TestKeptTaskFilesCapped(t *testing.T) {
	for _, tc := range []struct {
		file string
		size int64
	}{
		{"task.toml", MaxTaskTOML + 1},
		{"instruction.md", 3 << 30},
		{"environment/Dockerfile", MaxDockerfile + 1},
	} {
		root := t.TempDir()
		writeTask(t, root, "big")
		path := filepath.Join(root, "big", filepath.FromSlash(tc.file))
		must(t, os.WriteFile(path, nil, 0o644))
		must(t, os.Truncate(path, tc.size))
		tasks, diags := LoadDir(root, LoadOptions{})
		if len(tasks) != 0 || len(diags) != 1 || !strings.Contains(diags[0].Detail, "more than the") || !strings.Contains(diags[0].Detail, tc.file) {
			t.Errorf("%s of %d bytes: tasks %d, diagnostics %v", tc.file, tc.size, len(tasks), diags)
		}
	}
}

// BenchmarkParseTaskConfigMaxEntries is the worst a task.toml within the
// limits costs to parse: MaxTaskTOMLEntries-1 keys in one table.
func BenchmarkParseTaskConfigMaxEntries(b *testing.B) {
	src := manyKeys(MaxTaskTOMLEntries - 1)
	for b.Loop() {
		ParseTaskConfig("task.toml", src)
	}
}

// BenchmarkParseTaskConfigRefused is what refusing a 1 MiB task.toml of
// 150,000 keys costs: the linear count, stopped at the key too many.
func BenchmarkParseTaskConfigRefused(b *testing.B) {
	src := manyKeys(110000)
	for b.Loop() {
		ParseTaskConfig("task.toml", src)
	}
}
