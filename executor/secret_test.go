package executor_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// TestSecretValuesNeverStored plants a secret as the value of a harness
// variable and of a verifier variable, applies (harness, verifier, plan
// file, re-verify), and scans every file of the store and the saved plan
// for it. The harness and the test script use the value but do not print
// it: hemra does not redact what a harness prints itself, so this test is
// about hemra's own records.
func TestSecretValuesNeverStored(t *testing.T) {
	const secret = "sk-planted-7f3a9c1e-do-not-store"
	dir := t.TempDir()
	files := map[string]string{
		"main.hcl": `variable "here" {
  type = string
}

sandbox "local" {
  kind = "local"
}

harness "agent" {
  command = ["sh", "${var.here}/agent.sh", "${var.here}/expected"]
  sandbox = sandbox.local
  env     = ["API_KEY"]
  args    = { model = "demo" }
}

verifier "keyed" {
  env = ["JUDGE_KEY"]
}

dataset "d" {
  source = "./tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.agent]
  verifier  = verifier.keyed
}
`,
		// The scripts compare the values with a file outside the store, so
		// that the copies hemra keeps of tests/ hold no secret either.
		"agent.sh": hello + `
if [ "$API_KEY" = "$(cat "$1")" ]; then echo hello > "$HEMRA_WORKDIR/hello.txt"; fi
echo '{"type":"event","kind":"log","data":{"level":"info","message":"checked the key"}}'
echo '{"type":"result","status":"ok","output":"done"}'
`,
		"expected":                   secret,
		"tasks/hello/task.toml":      "[verifier.env]\nTOKEN = \"${JUDGE_KEY}\"\n",
		"tasks/hello/instruction.md": "Write hello to hello.txt.\n",
		"tasks/hello/tests/test.sh": `LOGS="$HEMRA_VERIFIER_LOGS"
if [ "$TOKEN" = "$(cat "$EXPECTED")" ] && [ "$(cat "$HEMRA_WORKDIR/hello.txt")" = hello ]; then echo 1 > "$LOGS/reward.txt"; else echo 0 > "$LOGS/reward.txt"; fi
`,
	}
	files["tasks/hello/task.toml"] = "[verifier.env]\nTOKEN = \"${JUDGE_KEY}\"\nEXPECTED = \"" + filepath.Join(dir, "expected") + "\"\n"
	writeFiles(t, dir, files)

	e := newEnv(t, dir)
	e.hcl = []string{"here=" + dir}
	e.vars = map[string]string{"API_KEY": secret, "JUDGE_KEY": secret}
	rep, _ := e.apply(context.Background(), 1)
	if len(rep.Attempts) != 1 || rep.Attempts[0].Class != state.ClassPassed {
		t.Fatalf("the secret did not reach the harness and the verifier: %+v", rep.Attempts)
	}

	// A re-verify (the test changed) and a saved plan.
	writeFiles(t, dir, map[string]string{"tasks/hello/tests/helper.txt": "changed\n"})
	plan, _ := e.plan()
	planFile := filepath.Join(dir, "plan.hplan")
	if err := planner.WritePlanFile(planFile, plan); err != nil {
		t.Fatal(err)
	}
	if rep, _ := e.apply(context.Background(), 1); len(rep.Attempts) != 1 || rep.Attempts[0].Class != state.ClassPassed {
		t.Fatalf("re-verify: %+v", rep.Attempts)
	}

	scanned := 0
	check := func(path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s holds the secret value", path)
		}
	}
	err := filepath.WalkDir(e.store, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			check(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check(planFile)
	if scanned < 5 {
		t.Fatalf("scanned only %d files", scanned)
	}
}
