package dataset

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// GenerateHarborTasks writes n small but realistic Harbor task folders under
// dir, named task-00000, task-00001, ...: task.toml, instruction.md,
// environment/Dockerfile, tests/test.sh and solution/solve.sh, shaped like
// terminal-bench tasks. The same seed writes the same bytes, so benchmarks
// that load the result are comparable run to run. The scripts run on any
// Linux host with the local sandbox's HEMRA_* variables or Harbor's paths.
func GenerateHarborTasks(dir string, n int, seed int) error {
	if n < 0 {
		return fmt.Errorf("generate tasks: n must not be negative, got %d", n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("generate tasks: %w", err)
	}
	workers := min(runtime.GOMAXPROCS(0)*2, max(n, 1))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := writeGeneratedTask(dir, i, seed); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("generate tasks: %w", err)
		}
	}
	return nil
}

var (
	genCategories = []string{"software-engineering", "system-administration", "data-processing", "security", "debugging", "scientific-computing"}
	genDifficulty = []string{"easy", "medium", "hard"}
	genImages     = []string{"ubuntu:24.04", "python:3.12-slim", "debian:bookworm-slim"}
	genNouns      = []string{"log file", "CSV report", "config file", "word list", "JSON export", "inventory"}
	genVerbs      = []string{"count the lines of", "sort", "deduplicate", "summarise", "normalise", "checksum"}
)

func writeGeneratedTask(dir string, i, seed int) error {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	name := fmt.Sprintf("task-%05d", i)
	root := filepath.Join(dir, name)
	category := genCategories[r.IntN(len(genCategories))]
	difficulty := genDifficulty[r.IntN(len(genDifficulty))]
	image := genImages[r.IntN(len(genImages))]
	noun := genNouns[r.IntN(len(genNouns))]
	verb := genVerbs[r.IntN(len(genVerbs))]
	answer := r.IntN(100000)

	taskToml := fmt.Sprintf(`version = "1.0"

[metadata]
author_name = "hemra benchmark"
author_email = "bench@example.com"
difficulty = %q
category = %q
tags = ["generated", %q]

[verifier]
timeout_sec = %d.0

[agent]
timeout_sec = %d.0

[environment]
build_timeout_sec = 600.0
cpus = %d
memory_mb = %d
storage_mb = 10240
`, difficulty, category, strings.Fields(noun)[0], 60+r.IntN(12)*30, 300+r.IntN(10)*60, 1+r.IntN(2), 1024*(1+r.IntN(4)))

	var instr strings.Builder
	fmt.Fprintf(&instr, "# %s\n\nYour job is to %s the %s in `/app/input.txt` and write the result to `/app/output.txt`.\n\n", strings.ToUpper(verb[:1])+verb[1:]+" the "+noun, verb, noun)
	for p := range 1 + r.IntN(3) {
		fmt.Fprintf(&instr, "Requirement %d: keep the original file unchanged, use only tools present in the image, and make sure the output ends with a newline. ", p+1)
	}
	fmt.Fprintf(&instr, "\n\nThe expected answer for this instance is derived from seed %d.\n", answer)

	dockerfile := fmt.Sprintf("FROM %s\n\nWORKDIR /app\nRUN printf '%%s\\n' %d > /app/input.txt\n", image, answer)
	testSh := fmt.Sprintf(`#!/bin/sh
# Verifier for %s: reward 1 when the agent wrote the expected answer.
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
WORK="${HEMRA_WORKDIR:-/app}"
mkdir -p "$LOGS"
if [ "$(cat "$WORK/output.txt" 2>/dev/null)" = "%d" ]; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
`, name, answer)
	solveSh := fmt.Sprintf("#!/bin/sh\n# Oracle solution for %s.\nWORK=\"${HEMRA_WORKDIR:-/app}\"\necho %d > \"$WORK/output.txt\"\n", name, answer)

	files := []struct {
		rel  string
		body string
		mode os.FileMode
	}{
		{"task.toml", taskToml, 0o644},
		{"instruction.md", instr.String(), 0o644},
		{"environment/Dockerfile", dockerfile, 0o644},
		{"tests/test.sh", testSh, 0o755},
		{"solution/solve.sh", solveSh, 0o755},
	}
	for _, sub := range []string{"environment", "tests", "solution"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(f.rel)), []byte(f.body), f.mode); err != nil {
			return err
		}
	}
	return nil
}
