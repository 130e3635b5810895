package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hemra-dev/hemra/state"
)

// A task that carries a big file (here 256 MiB, sparse: 4 KiB of data)
// must not cost a dense copy of it per attempt: the local sandbox copies
// it without filling its holes (and as a reflink where the filesystem
// can), and once an attempt is recorded its work folder drops what the
// store or the task already holds (the stored artifacts, tests/, and app/
// when the snapshot keeps it). Re-running every attempt leaves the
// superseded ones' snapshots removed too.
func TestWorkFoldersDoNotGrowWithTaskFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.hcl": `sandbox "local" {
  kind = "local"
}
harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
}
dataset "d" {
  source = "./tasks"
}
eval "e" {
  dataset   = dataset.d
  harnesses = [harness.oracle]
  attempts  = 3
}
`,
		"tasks/big/task.toml":         "",
		"tasks/big/instruction.md":    "Say hello.\n",
		"tasks/big/solution/solve.sh": "#!/bin/sh\necho hello > \"$HEMRA_WORKDIR/hello.txt\"\nmkdir -p \"$HEMRA_ARTIFACTS_DIR\" && echo art > \"$HEMRA_ARTIFACTS_DIR/out.txt\"\n",
		"tasks/big/tests/test.sh":     "#!/bin/sh\ntest -s \"$HEMRA_WORKDIR/data.bin\" && grep -q hello \"$HEMRA_WORKDIR/hello.txt\" && echo 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\" || echo 0 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n",
	})
	const size = 256 << 20
	big := filepath.Join(dir, "tasks/big/environment/data.bin")
	if err := os.MkdirAll(filepath.Dir(big), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("data at the start"), 0)
	f.Truncate(size)
	f.Close()

	e := newEnv(t, dir)
	usage := func() state.Usage {
		st, err := state.Open(e.store, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := st.Usage()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	rep, _ := e.apply(context.Background(), 3)
	for _, a := range rep.Attempts {
		if a.Class != state.ClassPassed {
			t.Fatalf("%s: %s %s (the big file must reach the workspace)", a.Address, a.Class, a.Error)
		}
	}
	u := usage()
	if u.Work > 16<<20 {
		t.Errorf("3 attempts of a task with a %d MiB sparse file: work folders take %d MiB on disk, want a few KiB each", size>>20, u.Work>>20)
	}
	for _, a := range rep.Attempts {
		ws := filepath.Join(e.store, "work", a.AttemptID)
		for _, gone := range []string{"app", "tests", "artifacts/out.txt"} {
			if _, err := os.Stat(filepath.Join(ws, gone)); err == nil {
				t.Errorf("%s: %s is still in the work folder", a.Address, gone)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, "snapshot", "app", "data.bin")); err != nil {
			t.Errorf("%s: the snapshot lost the agent's working folder: %v", a.Address, err)
		}
	}

	// A re-run of every attempt: the superseded attempts' snapshots go.
	writeFiles(t, dir, map[string]string{"tasks/big/instruction.md": "Say hello again.\n"})
	rep2, _ := e.apply(context.Background(), 3)
	if len(rep2.Attempts) != 3 {
		t.Fatalf("re-run: %d attempts", len(rep2.Attempts))
	}
	for _, a := range rep.Attempts {
		if _, err := os.Stat(filepath.Join(e.store, "work", a.AttemptID, "snapshot")); err == nil {
			t.Errorf("%s: the superseded attempt's snapshot is still there", a.Address)
		}
	}
	if u := usage(); u.Work > 16<<20 {
		t.Errorf("after a re-run: work folders take %d MiB", u.Work>>20)
	}
}
