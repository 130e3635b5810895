package planner_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// TestSecretsNeverRecorded plants secret values where a careless planner
// would copy them — an environment variable a harness names, a sensitive
// variable feeding the harness's args, a literal key in a task.toml's
// [verifier.env] — and proves none appears in the JSON plan, the saved
// plan file or a state file holding the planned manifests.
func TestSecretsNeverRecorded(t *testing.T) {
	const (
		envSecret  = "sk-env-planted-4f1e9c"
		varSecret  = "sk-var-planted-7a2b3d"
		tomlSecret = "sk-toml-planted-9d8c7b"
	)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), []byte(`
variable "token" {
  type      = string
  sensitive = true
}

sandbox "local" {
  kind = "local"
}

harness "agent" {
  command = ["sh", "-c", "true"]
  sandbox = sandbox.local
  env     = ["OPENAI_API_KEY"]
  args    = { token = var.token, model = "m" }
}

dataset "d" {
  source = "./tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.agent]
  attempts  = 2
}
`))
	writeFile(t, filepath.Join(dir, "tasks/t1/task.toml"), []byte("version = \"1.0\"\n\n[verifier.env]\nAPI_KEY = \""+tomlSecret+"\"\n"))
	writeFile(t, filepath.Join(dir, "tasks/t1/instruction.md"), []byte("Do it.\n"))
	writeFile(t, filepath.Join(dir, "tasks/t1/tests/test.sh"), []byte("#!/bin/sh\necho 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n"))

	environ := []string{"OPENAI_API_KEY=" + envSecret, "HEMRA_VAR_token=" + varSecret}
	cfg, diags := config.Load(dir, config.LoadOptions{Environ: environ})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, diags := planner.Compute(cfg, planner.EmptyPrior(), planner.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if plan.Summary.Run != 2 {
		t.Fatalf("want 2 attempts to run, got %+v", plan.Summary)
	}
	secrets := []string{envSecret, varSecret, tomlSecret}
	check := func(what string, data []byte) {
		t.Helper()
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds the secret %q", what, s)
			}
		}
	}

	js, _ := json.Marshal(plan)
	check("the JSON plan", js)
	var text bytes.Buffer
	for _, detailed := range []bool{false, true} {
		planner.RenderText(&text, plan, planner.TextOptions{Detailed: detailed})
		planner.RenderMarkdown(&text, plan, planner.MarkdownOptions{Detailed: detailed})
	}
	check("the text and Markdown plans", text.Bytes())

	planFile := filepath.Join(t.TempDir(), "plan.hplan")
	if err := planner.WritePlanFile(planFile, plan); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(planFile)
	check("the saved plan file", raw)
	zr, err := gzip.NewReader(bytes.NewReader(raw[len("hemra-plan\n"):]))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if !bytes.Contains(unzipped, []byte(`"harness.command"`)) {
		t.Fatalf("the saved plan does not hold the manifests this test means to scan")
	}
	check("the saved plan file, uncompressed", unzipped)

	// The state, after recording the planned manifests as apply does.
	storeDir := filepath.Join(t.TempDir(), ".hemra")
	store, err := state.Open(storeDir, state.Options{Writer: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var attempts []*state.Attempt
	for _, pa := range plan.Attempts {
		attempts = append(attempts, &state.Attempt{
			ID: state.NewID(), Address: pa.Address, RunID: "run", Manifest: *pa.Manifest,
			Transitions: []state.Transition{{Status: state.StatusPending, At: time.Now()}},
		})
	}
	if err := store.AddAttempts(attempts); err != nil {
		t.Fatal(err)
	}
	for _, pa := range plan.Attempts {
		for sha, path := range planner.TextBlobs(cfg, pa) {
			data, _ := os.ReadFile(path)
			if got, err := store.PutBlob(data); err != nil || got != sha {
				t.Fatalf("blob %s: %v", sha, err)
			}
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	scanned := 0
	filepath.WalkDir(storeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned++
		check("store file "+strings.TrimPrefix(p, storeDir), data)
		return nil
	})
	if scanned == 0 {
		t.Fatal("the store holds no file to scan")
	}
}
