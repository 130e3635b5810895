package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/executor"
	"github.com/hemra-dev/hemra/planner"
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

// Once an attempt is recorded with a result, its work folder goes: a nop
// attempt leaves nothing (its snapshot is local.EmptySnapshot, no
// folder), an oracle attempt only the snapshot/ a re-verify restores
// from, and an attempt that ended in an error keeps its folder. Both
// snapshots serve a re-verify. Options.KeepWork keeps every folder.
func TestWorkFolderRemovedOnceRecorded(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.hcl": `sandbox "local" {
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
dataset "d" {
  source = "./tasks"
}
eval "e" {
  dataset   = dataset.d
  harnesses = [harness.oracle, harness.nop]
}
`,
		"tasks/hello/task.toml":          "",
		"tasks/hello/instruction.md":     "Say hello.\n",
		"tasks/hello/solution/solve.sh":  "#!/bin/sh\necho hello > \"$HEMRA_WORKDIR/hello.txt\"\n",
		"tasks/hello/tests/test.sh":      "#!/bin/sh\ngrep -q hello \"$HEMRA_WORKDIR/hello.txt\" && echo 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\" || echo 0 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n",
		"tasks/broken/task.toml":         "",
		"tasks/broken/instruction.md":    "Nothing.\n",
		"tasks/broken/solution/solve.sh": "#!/bin/sh\ntrue\n",
		"tasks/broken/tests/test.sh":     "#!/bin/sh\necho no reward\n",
	})
	e := newEnv(t, dir)
	left := func(id string) []string {
		entries, err := os.ReadDir(filepath.Join(e.store, "work", id))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		return names
	}
	check := func(rep *executor.Report, keepAll, reverify bool) {
		t.Helper()
		want := map[string]state.Class{
			"e/oracle/hello#1": state.ClassPassed, "e/nop/hello#1": state.ClassTaskFailure,
			"e/oracle/broken#1": state.ClassVerifierError, "e/nop/broken#1": state.ClassVerifierError,
		}
		for _, a := range rep.Attempts {
			if a.Class != want[a.Address] {
				t.Fatalf("%s: %s %s, want %s", a.Address, a.Class, a.Error, want[a.Address])
			}
			got := strings.Join(left(a.AttemptID), " ")
			switch {
			case keepAll || a.Class == state.ClassVerifierError:
				if !strings.Contains(got, "logs") {
					t.Errorf("%s (%s): work folder holds %q, want it kept", a.Address, a.Class, got)
				}
			case a.Address == "e/oracle/hello#1" && !reverify:
				if got != "snapshot" {
					t.Errorf("%s: work folder holds %q, want only snapshot", a.Address, got)
				}
			default:
				if got != "" {
					t.Errorf("%s: work folder holds %q, want none", a.Address, got)
				}
			}
		}
	}
	rep, _ := e.apply(context.Background(), 2)
	check(rep, false, false)
	var oracleFirst string
	for _, a := range rep.Attempts {
		if a.Address == "e/oracle/hello#1" {
			oracleFirst = a.AttemptID
		}
	}

	// Re-verify both harnesses' attempts at hello, from their snapshots.
	writeFiles(t, dir, map[string]string{"tasks/hello/tests/test.sh": "#!/bin/sh\n# edited\ngrep -q hello \"$HEMRA_WORKDIR/hello.txt\" && echo 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\" || echo 0 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n"})
	plan, _ := e.plan()
	for _, pa := range plan.Attempts {
		if strings.Contains(pa.Address, "/hello#") && pa.Action != planner.ActionReverify {
			t.Fatalf("%s: %s after editing the test, want re-verify", pa.Address, pa.Action)
		}
	}
	rep, _ = e.apply(context.Background(), 2)
	if len(rep.Attempts) != 2 {
		t.Fatalf("re-verify: %d attempts", len(rep.Attempts))
	}
	// A re-verify restores its prior's snapshot into a work folder of its
	// own, which goes; the prior's snapshot stays, as the current attempt
	// still names it.
	check(rep, false, true)
	if got := strings.Join(left(oracleFirst), " "); got != "snapshot" {
		t.Errorf("the re-verified attempt's work folder holds %q, want its snapshot", got)
	}

	e.opts.KeepWork = true
	writeFiles(t, dir, map[string]string{"tasks/hello/instruction.md": "Say hello again.\n", "tasks/broken/instruction.md": "Nothing again.\n"})
	rep, _ = e.apply(context.Background(), 2)
	if len(rep.Attempts) != 4 {
		t.Fatalf("re-run: %d attempts", len(rep.Attempts))
	}
	check(rep, true, false)
}

// The work folders of recorded local attempts are emptied and reused by
// the attempts after them (fewer folders made and removed per attempt):
// every attempt still starts with empty folders, whatever the one before
// left or changed in them, and none is left once the apply ends.
func TestRecycledWorkFoldersStartEmpty(t *testing.T) {
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
  attempts  = 6
}
`,
		// Verified in the agent's own environment: no snapshot folder, so
		// the work folder goes once recorded.
		"tasks/t/task.toml":      "[verifier]\nenvironment_mode = \"shared\"\n",
		"tasks/t/instruction.md": "Leave things behind.\n",
		"tasks/t/solution/solve.sh": `#!/bin/sh
set -e
# Whatever an earlier attempt left must not be here.
for d in "$HEMRA_WORKDIR" "$HEMRA_AGENT_LOGS" "$HEMRA_VERIFIER_LOGS" "$HEMRA_ARTIFACTS_DIR"; do
  if [ -n "$(ls -A "$d")" ]; then echo "left in $d: $(ls -A "$d")" >&2; exit 3; fi
done
test ! -e "$HEMRA_WORKDIR/../tests/extra.txt"
test -z "$(find "$HEMRA_WORKDIR/../collected/logs" ! -type d 2>/dev/null)"
# Longer than a batch of the store's writes waits: the attempts before
# this one are recorded, their folders spare.
sleep 0.3
echo hello > "$HEMRA_WORKDIR/hello.txt"
mkdir -p "$HEMRA_WORKDIR/sub/deeper" && echo x > "$HEMRA_WORKDIR/sub/deeper/x"
echo log > "$HEMRA_AGENT_LOGS/agent.txt"
echo art > "$HEMRA_ARTIFACTS_DIR/out.txt"
mkdir -p "$HEMRA_WORKDIR/../extra" && echo x > "$HEMRA_WORKDIR/../extra/x"
# Every other attempt changes a folder's mode: its folder is not reused.
if [ -e "$HEMRA_WORKDIR/../../odd" ]; then rm "$HEMRA_WORKDIR/../../odd"; chmod 0700 "$HEMRA_AGENT_LOGS"; else touch "$HEMRA_WORKDIR/../../odd"; fi
`,
		// solve.sh exited 0 (the oracle keeps a failure's exit code in
		// logs/agent/exit-code.txt).
		"tasks/t/tests/test.sh": "#!/bin/sh\necho extra > \"$HEMRA_TESTS_DIR/extra.txt\"\ntest ! -e \"$HEMRA_AGENT_LOGS/exit-code.txt\" && grep -q hello \"$HEMRA_WORKDIR/hello.txt\" && echo 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\" || echo 0 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n",
	})
	e := newEnv(t, dir)
	// A spare a killed apply left: the next apply removes it.
	left := filepath.Join(e.store, "work", ".spare-1-1", "app")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "secret.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _ := e.apply(context.Background(), 1)
	if len(rep.Attempts) != 6 {
		t.Fatalf("%d attempts, want 6", len(rep.Attempts))
	}
	for _, a := range rep.Attempts {
		if a.Class != state.ClassPassed {
			t.Errorf("%s: %s %s", a.Address, a.Class, a.Error)
		}
	}
	entries, err := os.ReadDir(filepath.Join(e.store, "work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Name() != "odd" {
			t.Errorf("work/%s is left after the apply", en.Name())
		}
	}
}
