package config

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hemra-dev/hemra/dataset"
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// TestMain removes the benchmark's generated eval directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// tenKTasksDir generates, once per test binary, an eval directory whose
// dataset holds 10,000 Harbor-format tasks.
func tenKTasksDir(b *testing.B) string {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "hemra-bench-config-*")
		if benchErr != nil {
			return
		}
		benchErr = dataset.GenerateHarborTasks(filepath.Join(benchDir, "tasks"), 10000, 1)
		if benchErr != nil {
			return
		}
		benchErr = os.WriteFile(filepath.Join(benchDir, "main.hcl"), []byte(`
sandbox "local" {
  kind = "local"
}
harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
}
harness "nop" {
  builtin = "nop"
  sandbox = sandbox.local
}
dataset "big" {
  source = "./tasks"
}
eval "big" {
  dataset   = dataset.big
  harnesses = [harness.oracle, harness.nop]
}
`), 0o644)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

// BenchmarkLoad10kTasks loads an eval directory of 10,000 Harbor tasks
// (reading and hashing every task file). Goal: well under 1 s per op.
//
//	go test ./config -run '^$' -bench Load10kTasks -benchtime 5x
func BenchmarkLoad10kTasks(b *testing.B) {
	dir := tenKTasksDir(b)
	b.ResetTimer()
	for b.Loop() {
		cfg, diags := Load(dir, LoadOptions{})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if n := len(cfg.Datasets["big"].Tasks); n != 10000 {
			b.Fatalf("loaded %d tasks", n)
		}
	}
}
