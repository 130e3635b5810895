package dataset

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	bench10kOnce sync.Once
	bench10kDir  string
	bench10kErr  error
)

// bench10k generates 10,000 tasks once per test binary run.
func bench10k(b *testing.B) string {
	bench10kOnce.Do(func() {
		bench10kDir, bench10kErr = os.MkdirTemp("", "hemra-bench-10k-")
		if bench10kErr == nil {
			bench10kErr = GenerateHarborTasks(filepath.Join(bench10kDir, "tasks"), 10000, 1)
		}
	})
	if bench10kErr != nil {
		b.Fatal(bench10kErr)
	}
	return filepath.Join(bench10kDir, "tasks")
}

// BenchmarkLoadDir10k loads 10,000 generated Harbor tasks (five files each)
// from a warm page cache: one op is the whole dataset.
func BenchmarkLoadDir10k(b *testing.B) {
	dir := bench10k(b)
	b.ReportAllocs()
	for b.Loop() {
		tasks, diags := LoadDir(dir, LoadOptions{})
		if diags.HasErrors() || len(tasks) != 10000 {
			b.Fatalf("loaded %d tasks, diagnostics: %v", len(tasks), diags)
		}
	}
}
