package executor_test

import (
	"context"
	"testing"

	"github.com/hemra-dev/hemra/state"
)

// TestJudgeSeam: an eval that declares judges records that they did not
// run (judges are a later release); the attempt's own result stands.
func TestJudgeSeam(t *testing.T) {
	dir := t.TempDir()
	files := parseFiles(helloTask)
	files["main.hcl"] = `sandbox "local" {
  kind = "local"
}

harness "nop" {
  builtin = "nop"
  sandbox = sandbox.local
}

dataset "d" {
  source = "./tasks"
}

judge "quality" {
  source   = "./judges/quality"
  base_url = "https://api.example.invalid/v1"
  key_env  = "JUDGE_KEY"
  model    = "m"
}

eval "judged" {
  dataset   = dataset.d
  harnesses = [harness.nop]
  judges    = [judge.quality]
}

eval "plain" {
  dataset   = dataset.d
  harnesses = [harness.nop]
}
`
	files["judges/quality/judge.toml"] = "[judge]\nmodel = \"m\"\n"
	files["judges/quality/rubric.md"] = "Is it good?\n"
	writeFiles(t, dir, files)
	e := newEnv(t, dir)
	e.vars["JUDGE_KEY"] = "k"
	e.apply(context.Background(), 2)

	st, err := state.Open(e.store, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.CurrentAttempt("judged/nop/hello#1")
	if err != nil {
		t.Fatal(err)
	}
	var judged bool
	for _, tr := range a.Transitions {
		if tr.Status == state.StatusJudge && tr.Note == "judges not run: not implemented yet" {
			judged = true
		}
	}
	if !judged || a.Outcome.Judges["quality"].Error == "" || a.Outcome.Class != state.ClassTaskFailure {
		t.Errorf("judged attempt: transitions %+v, outcome %+v", a.Transitions, a.Outcome)
	}
	p, err := st.CurrentAttempt("plain/nop/hello#1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range p.Transitions {
		if tr.Status == state.StatusJudge {
			t.Errorf("an eval without judges has a judge stage")
		}
	}
	if p.Outcome.Judges != nil {
		t.Errorf("an eval without judges has judge scores: %v", p.Outcome.Judges)
	}
}
