package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exportTasks are two Harbor tasks run by the oracle on the local sandbox
// whose commands all print to both streams: a single-step one whose
// verifier writes reward.json and ctrf.json, and a two-step one with a
// reward per step. Every command's output, every log file and every step
// is something an export must carry.
var exportTasks = map[string]string{
	"one/instruction.md":    "Say hi.\n",
	"one/task.toml":         "version = \"1.0\"\n",
	"one/solution/solve.sh": "#!/bin/sh\necho solve-out-one\necho solve-err-one >&2\n",
	"one/tests/test.sh": "#!/bin/sh\nLOGS=\"${HEMRA_VERIFIER_LOGS:-/logs/verifier}\"\necho test-out-one\necho test-err-one >&2\n" +
		"echo '{\"passed\": 1}' > \"$LOGS/ctrf.json\"\necho '{\"reward\": 0.5, \"style\": 1}' > \"$LOGS/reward.json\"\n",
	"two/instruction.md": "Two steps.\n",
	"two/task.toml":      "version = \"1.0\"\n\n[[steps]]\nname = \"write\"\n\n[[steps]]\nname = \"check\"\n",
}

func init() {
	for _, s := range []string{"write", "check"} {
		exportTasks["two/steps/"+s+"/instruction.md"] = "Do " + s + ".\n"
		exportTasks["two/steps/"+s+"/solution/solve.sh"] = "#!/bin/sh\necho solve-out-" + s + "\necho solve-err-" + s + " >&2\n"
		exportTasks["two/steps/"+s+"/tests/test.sh"] = "#!/bin/sh\nLOGS=\"${HEMRA_VERIFIER_LOGS:-/logs/verifier}\"\necho test-out-" + s +
			"\necho test-err-" + s + " >&2\necho 1 > \"$LOGS/reward.txt\"\n"
	}
}

const exportHCL = `sandbox "local" {
  kind = "local"
}

harness "oracle" {
  builtin = "oracle"
  env     = ["PLANTED_SECRET"]
  sandbox = sandbox.local
}

dataset "d" {
  source = "./tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.oracle]
  attempts  = 1
}
`

// TestExportCarriesEveryBlob exports attempts whose records name command
// outputs, log files and steps, in both layouts: the hemra export read
// back into a fresh store shows each attempt exactly as the store it came
// from (the tails of every command's output included), and the Harbor
// layout holds each file where Harbor's trial folder has it.
func TestExportCarriesEveryBlob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ev")
	for rel, body := range exportTasks {
		p := filepath.Join(dir, "tasks", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(exportHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	out := hemraOK(t, dir, []string{"PLANTED_SECRET=" + plantedSecret}, "apply", "-auto-approve", "-no-color")
	if !strings.Contains(out, "Apply complete: 2 attempts") {
		t.Fatalf("apply:\n%s", out)
	}
	addrs := []string{"e/oracle/one#1", "e/oracle/two#1"}
	shows := map[string]string{}
	for _, a := range addrs {
		shows[a] = hemraOK(t, dir, nil, "show", a)
	}
	for _, want := range []string{"solve-err-one", "test-out-one", "verifier/ctrf.json"} {
		if !strings.Contains(shows[addrs[0]], want) {
			t.Fatalf("show %s lacks %q:\n%s", addrs[0], want, shows[addrs[0]])
		}
	}
	for _, want := range []string{"write  snapshot  1", "test-err-check", "steps/check/verifier/reward.txt"} {
		if !strings.Contains(shows[addrs[1]], want) {
			t.Fatalf("show %s lacks %q:\n%s", addrs[1], want, shows[addrs[1]])
		}
	}
	// The store names every blob it holds.
	if got := hemraOK(t, dir, nil, "state", "check"); strings.Contains(got, "orphan") {
		t.Errorf("state check of the applied store:\n%s", got)
	}

	t.Run("hemra", func(t *testing.T) {
		for _, target := range append([]string{"e/oracle"}, addrs...) {
			for _, name := range []string{"x", "x.tar.gz"} {
				out := filepath.Join(t.TempDir(), name)
				hemraOK(t, dir, nil, "export", target, "-out", out)
				assertNoSecret(t, out)
				other := t.TempDir()
				hemraOK(t, other, nil, "import", "-format", "hemra", out)
				if target == "e/oracle" {
					sameRecords(t, filepath.Join(dir, ".hemra"), filepath.Join(other, ".hemra"))
				}
				if got := hemraOK(t, other, nil, "state", "check"); strings.Contains(got, "orphan") || !strings.Contains(got, "No inconsistencies") {
					t.Errorf("state check after importing %s of %s:\n%s", name, target, got)
				}
				for _, a := range addrs {
					if target != "e/oracle" && target != a {
						continue
					}
					if got := hemraOK(t, other, nil, "show", a); got != shows[a] {
						t.Errorf("show %s after importing %s of %s differs:\n%s\n--- want\n%s", a, name, target, got, shows[a])
					}
				}
			}
		}
	})

	t.Run("harbor", func(t *testing.T) {
		job := filepath.Join(t.TempDir(), "job")
		hemraOK(t, dir, nil, "export", "e/oracle", "-format", "harbor", "-out", job)
		assertNoSecret(t, job)
		hemraOK(t, dir, nil, "export", "e/oracle", "-format", "harbor", "-out", job+".tar.gz")
		assertNoSecret(t, job+".tar.gz")
		trials := map[string]string{}
		results, _ := filepath.Glob(filepath.Join(job, "*", "result.json"))
		for _, r := range results {
			b, _ := os.ReadFile(r)
			for _, p := range checkSchema(b, trialResultSchema) {
				t.Errorf("%s: %s", r, p)
			}
			var tr struct {
				TaskName string `json:"task_name"`
			}
			_ = json.Unmarshal(b, &tr)
			trials[tr.TaskName] = filepath.Dir(r)
		}
		if len(trials) != 2 {
			t.Fatalf("trials %v", trials)
		}
		want := map[string]map[string]string{
			"one": {
				"agent/oracle.txt": "", // stdout and stderr merged: their order is the host's
				"agent/hemra-commands/solution-solve.sh.stdout.txt": "solve-out-one\n",
				"agent/hemra-commands/solution-solve.sh.stderr.txt": "solve-err-one\n",
				"verifier/test-stdout.txt":                          "",
				"verifier/ctrf.json":                                "{\"passed\": 1}\n",
				"verifier/reward.json":                              "{\"reward\": 0.5, \"style\": 1}\n",
				"verifier/hemra-commands/tests-test.sh.stdout.txt":  "test-out-one\n",
				"verifier/hemra-commands/tests-test.sh.stderr.txt":  "test-err-one\n",
			},
			"two": {},
		}
		for _, s := range []string{"write", "check"} {
			w := want["two"]
			w["steps/"+s+"/agent/oracle.txt"] = ""
			w["steps/"+s+"/agent/hemra-commands/solution-solve.sh.stdout.txt"] = "solve-out-" + s + "\n"
			w["steps/"+s+"/agent/hemra-commands/solution-solve.sh.stderr.txt"] = "solve-err-" + s + "\n"
			w["steps/"+s+"/verifier/reward.txt"] = "1\n"
			w["steps/"+s+"/verifier/test-stdout.txt"] = ""
			w["steps/"+s+"/verifier/hemra-commands/tests-test.sh.stdout.txt"] = "test-out-" + s + "\n"
			w["steps/"+s+"/verifier/hemra-commands/tests-test.sh.stderr.txt"] = "test-err-" + s + "\n"
		}
		for task, files := range want {
			for rel, body := range files {
				b, err := os.ReadFile(filepath.Join(trials[task], filepath.FromSlash(rel)))
				switch {
				case err != nil:
					t.Errorf("trial of %s: %v", task, err)
				case body != "" && string(b) != body:
					t.Errorf("trial of %s: %s holds %q, want %q", task, rel, b, body)
				case body == "" && len(b) == 0:
					t.Errorf("trial of %s: %s is empty", task, rel)
				}
			}
		}
		// A multi-step trial has its rewards per step, none at the top,
		// and its steps' results in result.json.
		if _, err := os.Stat(filepath.Join(trials["two"], "verifier")); err == nil {
			t.Errorf("the multi-step trial has a verifier/ folder at the top")
		}
		b, _ := os.ReadFile(filepath.Join(trials["two"], "result.json"))
		var tr struct {
			StepResults []struct {
				StepName       string `json:"step_name"`
				VerifierResult struct {
					Rewards map[string]float64 `json:"rewards"`
				} `json:"verifier_result"`
			} `json:"step_results"`
		}
		if err := json.Unmarshal(b, &tr); err != nil || len(tr.StepResults) != 2 ||
			tr.StepResults[0].StepName != "write" || tr.StepResults[1].StepName != "check" || tr.StepResults[1].VerifierResult.Rewards["reward"] != 1 {
			t.Errorf("step_results of the two-step trial: %v %s", err, b)
		}
		// Read back by hemra import: each step with its reward.
		other := t.TempDir()
		hemraOK(t, other, nil, "import", job)
		got := hemraOK(t, other, nil, "show", "import/job/oracle/two#1")
		if !regexp.MustCompile(`(?m)^Steps:\n +write +1\n +check +1\n`).MatchString(got) {
			t.Errorf("show of the imported two-step trial does not list its steps with their rewards:\n%s", got)
		}
	})
}
