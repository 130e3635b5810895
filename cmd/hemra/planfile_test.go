package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// planDir is an eval with one non-sensitive and one sensitive variable,
// both in the harness's args, two tasks and attempts = 1.
func planDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"main.hcl": `variable "model" {
  type = string
}
variable "token" {
  type      = string
  sensitive = true
}
sandbox "local" {
  kind = "local"
}
harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
  args    = { model = var.model, token = var.token }
}
dataset "tasks" {
  source = "./tasks"
}
eval "smoke" {
  dataset   = dataset.tasks
  harnesses = [harness.oracle]
  attempts  = 1
}
`,
		"vars.hclvars": "model = \"from-file\"\n",
	}
	for _, task := range []string{"a", "b"} {
		files["tasks/"+task+"/task.toml"] = ""
		files["tasks/"+task+"/instruction.md"] = "Say hello.\n"
		files["tasks/"+task+"/solution/solve.sh"] = "#!/bin/sh\necho hello > \"$HEMRA_WORKDIR/hello.txt\"\n"
		files["tasks/"+task+"/tests/test.sh"] = "#!/bin/sh\necho 1 > \"$HEMRA_VERIFIER_LOGS/reward.txt\"\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hemraIn runs hemra in-process in dir with the given environment.
func hemraIn(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Main(append([]string{"-chdir", dir, "-no-color"}, args...), strings.NewReader(""), &out, &out, append(os.Environ(), env...))
	return code, out.String()
}

// editPlan decompresses a saved plan, lets edit change its JSON, and
// writes it back compressed under a new name, as a hand edit would.
func editPlan(t *testing.T, from, to string, edit func(p map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	const magic = "hemra-plan\n"
	zr, err := gzip.NewReader(bytes.NewReader(data[len(magic):]))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.NewDecoder(zr).Decode(&p); err != nil {
		t.Fatal(err)
	}
	edit(p)
	js, _ := json.Marshal(p)
	var buf bytes.Buffer
	buf.WriteString(magic)
	zw := gzip.NewWriter(&buf)
	zw.Write(js)
	zw.Close()
	if err := os.WriteFile(to, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func clone(v any) any {
	js, _ := json.Marshal(v)
	var out any
	json.Unmarshal(js, &out)
	return out
}

// TestEditedPlanRefused: a saved plan edited by hand (a changed command, an
// attempt listed twice, an attempt beyond attempts = 1, a changed summary)
// is refused, naming each difference, and nothing is recorded.
func TestEditedPlanRefused(t *testing.T) {
	dir := planDir(t)
	env := []string{"HEMRA_VAR_token=tok-1"}
	if code, out := hemraIn(t, dir, env, "plan", "-var", "model=m1", "-out", "p.hplan"); code != 0 {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	saved := filepath.Join(dir, "p.hplan")
	for _, tc := range []struct {
		name string
		edit func(p map[string]any)
		want string
	}{
		{"changed command", func(p map[string]any) {
			a := p["attempts"].([]any)[0].(map[string]any)
			for _, in := range a["manifest"].(map[string]any)["inputs"].([]any) {
				in := in.(map[string]any)
				if in["path"] == "harness.builtin" {
					in["value"] = `"nop"`
				}
			}
		}, `smoke/oracle/a#1: manifest.inputs[agent harness.builtin].value: the plan says "\"nop\""`},
		{"attempt listed twice", func(p map[string]any) {
			as := p["attempts"].([]any)
			p["attempts"] = append(as, clone(as[1]))
		}, "smoke/oracle/b#1: listed more than once in the plan"},
		{"attempt beyond attempts", func(p map[string]any) {
			as := p["attempts"].([]any)
			extra := clone(as[0]).(map[string]any)
			extra["address"], extra["repetition"] = "smoke/oracle/a#2", 2
			p["attempts"] = append(as, extra)
		}, "smoke/oracle/a#2: in the plan (run), but this configuration and state plan no such attempt"},
		{"summary", func(p map[string]any) {
			p["summary"].(map[string]any)["run"] = 7
		}, "summary: the plan says"},
	} {
		edited := filepath.Join(dir, "edited.hplan")
		editPlan(t, saved, edited, tc.edit)
		code, out := hemraIn(t, dir, env, "apply", "edited.hplan")
		if code != 1 || !strings.Contains(out, "is not the plan this configuration and state produce") || !strings.Contains(out, tc.want) {
			t.Errorf("%s: apply exit %d, want a refusal naming %q:\n%s", tc.name, code, tc.want, out)
		}
	}
	if _, out := hemraIn(t, dir, nil, "runs"); strings.Contains(out, "finished") {
		t.Errorf("an edited plan recorded a run:\n%s", out)
	}
	if code, out := hemraIn(t, dir, env, "apply", "p.hplan"); code != 0 || !strings.Contains(out, "Apply complete: 2 attempts") {
		t.Errorf("the untouched plan: exit %d\n%s", code, out)
	}
}

// TestSavedPlanKeepsVariables: a saved plan keeps non-sensitive variable
// values (set by -var or a -var-file, neither given again at apply) and
// refuses a different -var; a sensitive one is not kept and is asked for
// by name.
func TestSavedPlanKeepsVariables(t *testing.T) {
	dir := planDir(t)
	if code, out := hemraIn(t, dir, []string{"HEMRA_VAR_token=tok-1"}, "plan", "-var-file", "vars.hclvars", "-out", "p.hplan"); code != 0 {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "p.hplan"))
	zr, _ := gzip.NewReader(bytes.NewReader(raw[len("hemra-plan\n"):]))
	var js bytes.Buffer
	js.ReadFrom(zr)
	if strings.Contains(js.String(), "tok-1") {
		t.Fatalf("the saved plan holds the sensitive value")
	}
	if !strings.Contains(js.String(), `"from-file"`) {
		t.Fatalf("the saved plan does not keep model's value:\n%.400s", js.String())
	}

	code, out := hemraIn(t, dir, nil, "apply", "p.hplan")
	if code != 1 || !strings.Contains(out, `Variable "token" has no default`) || !strings.Contains(out, "keeps no sensitive value: give token again") {
		t.Errorf("apply without the sensitive value: exit %d, want it asked for by name:\n%s", code, out)
	}
	code, out = hemraIn(t, dir, []string{"HEMRA_VAR_token=tok-1"}, "apply", "-var", "model=other", "p.hplan")
	if code != 1 || !strings.Contains(out, "Can't change variable when applying a saved plan") || !strings.Contains(out, `"from-file"`) {
		t.Errorf("apply with a different -var: exit %d, want a refusal:\n%s", code, out)
	}
	code, out = hemraIn(t, dir, []string{"HEMRA_VAR_token=tok-2"}, "apply", "p.hplan")
	if code != 1 || !strings.Contains(out, "harness.args") {
		t.Errorf("apply with another sensitive value: exit %d, want a refusal naming harness.args:\n%s", code, out)
	}
	code, out = hemraIn(t, dir, []string{"HEMRA_VAR_token=tok-1"}, "apply", "-var", "model=from-file", "p.hplan")
	if code != 0 || !strings.Contains(out, "Apply complete: 2 attempts") {
		t.Errorf("apply with the saved values: exit %d\n%s", code, out)
	}
}

// TestAppliedPlanSaysSo: applying a saved plan a second time says the plan
// was already applied, naming the run, not that "another apply recorded
// attempts since".
func TestAppliedPlanSaysSo(t *testing.T) {
	dir := planDir(t)
	env := []string{"HEMRA_VAR_token=tok-1", "HEMRA_VAR_model=m"}
	hemraIn(t, dir, env, "plan", "-out", "p.hplan")
	if code, out := hemraIn(t, dir, env, "apply", "p.hplan"); code != 0 {
		t.Fatalf("first apply: %d\n%s", code, out)
	}
	code, out := hemraIn(t, dir, env, "apply", "p.hplan")
	if code != 1 || !strings.Contains(out, "this plan was already applied, by run ") || strings.Contains(out, "another apply") {
		t.Errorf("second apply: exit %d, want 'already applied':\n%s", code, out)
	}
}
