package executor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/executor"
	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/protocol/wire"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
	"github.com/hemra-dev/hemra/state"
)

// jsonlEval writes an eval directory with n JSONL tasks and one harness
// block (its body given).
func jsonlEval(b testing.TB, n int, harness string) string {
	dir := b.TempDir()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"id":"t%05d","input":"answer %d","target":"answer %d"}`+"\n", i, i, i)
	}
	writeFiles(b, dir, map[string]string{
		"tasks.jsonl": lines.String(),
		"main.hcl": `sandbox "local" {
  kind = "local"
}

harness "h" {
` + harness + `
  sandbox = sandbox.local
}

dataset "d" {
  source = "./tasks.jsonl"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.h]
}
`,
	})
	return dir
}

// benchApply applies the eval at dir b.N times, each time into a fresh
// store, timing only executor.Apply, and reports the time per attempt and
// the throughput.
func benchApply(b *testing.B, dir string, parallelism int) {
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	providers := map[string]sandbox.Provider{"local": local.New()}
	var attempts int
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		storeDir := filepath.Join(b.TempDir(), "store")
		plan, diags := planner.Compute(cfg, planner.EmptyPrior(), planner.Options{StoreDir: storeDir})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		st, err := state.Open(storeDir, state.Options{Writer: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		rep, err := executor.Apply(context.Background(), plan, cfg, st, executor.Options{Parallelism: parallelism, Providers: providers})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil { // pending writes committed
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		for _, a := range rep.Attempts {
			if a.Class != state.ClassPassed && a.Class != state.ClassTaskFailure {
				b.Fatalf("%s: %s %s", a.Address, a.Class, a.Error)
			}
		}
		attempts += len(rep.Attempts)
		b.StartTimer()
	}
	per := total / time.Duration(attempts)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/attempt")
	b.ReportMetric(float64(attempts)/total.Seconds(), "attempts/s")
}

// BenchmarkApplyNop applies 2,000 attempts of the nop harness on JSONL
// tasks with the local sandbox: no process runs, so the time is hemra's own
// per-attempt cost (recording, transitions, event log, outcome).
func BenchmarkApplyNop(b *testing.B) {
	dir := jsonlEval(b, 2000, `  builtin = "nop"`)
	for _, p := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("parallelism=%d", p), func(b *testing.B) { benchApply(b, dir, p) })
	}
}

// buildEcho builds the echo harness (testdata/echoharness).
func buildEcho(b testing.TB) string {
	bin := filepath.Join(b.TempDir(), "echoharness")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/echoharness").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkApplyProgram applies 200 attempts of a harness that answers at
// once (a harnesskit binary) on the local sandbox. Compare with
// BenchmarkBareHarness, the same process started and spoken to without
// hemra: the difference is hemra's overhead per attempt.
func BenchmarkApplyProgram(b *testing.B) {
	bin := buildEcho(b)
	dir := jsonlEval(b, 200, `  command = ["`+bin+`"]`)
	for _, p := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("parallelism=%d", p), func(b *testing.B) { benchApply(b, dir, p) })
	}
}

// BenchmarkBareHarness starts the echo harness and runs one protocol
// exchange with it (hello, run.start, result, exit) per iteration, with
// nothing else: the floor BenchmarkApplyProgram is compared with.
func BenchmarkBareHarness(b *testing.B) {
	bin := buildEcho(b)
	start, _ := json.Marshal(wire.Start{Type: wire.TypeRunStart, Protocol: wire.Version, Task: wire.Task{ID: "t", Input: json.RawMessage(`"answer"`)}})
	start = append(start, '\n')
	work := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(out)
		if _, err := r.ReadBytes('\n'); err != nil { // hello
			b.Fatal(err)
		}
		if _, err := in.Write(start); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadBytes('\n'); err != nil { // result
			b.Fatal(err)
		}
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/attempt")
}
