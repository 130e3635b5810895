package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/state"
)

func writerStore(t *testing.T) *state.Store {
	t.Helper()
	s, err := state.Open(filepath.Join(t.TempDir(), ".hemra"), state.Options{Writer: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// trialRewards reads the reward of every trial of a job folder straight
// from its result.json files, independently of package harborjob.
func trialRewards(t *testing.T, job string) map[string]float64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(job, "*", "result.json"))
	out := map[string]float64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			TaskName       string `json:"task_name"`
			VerifierResult struct {
				Rewards map[string]float64 `json:"rewards"`
			} `json:"verifier_result"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out[r.TaskName] = r.VerifierResult.Rewards["reward"]
	}
	return out
}

// TestImportRealHarborJobs imports the real Harbor job folders of
// testdata/harbor-jobs (see SOURCES.md) and checks that show's per-task
// rewards are their result.json files'.
func TestImportRealHarborJobs(t *testing.T) {
	jobs, _ := filepath.Glob("testdata/harbor-jobs/*__*")
	if len(jobs) < 2 {
		t.Fatalf("want at least two fixture jobs, found %v", jobs)
	}
	store := writerStore(t)
	for _, job := range jobs {
		rep, err := ImportHarbor(store, job, HarborOptions{})
		if err != nil {
			t.Fatalf("import %s: %v", job, err)
		}
		if rep.Added != rep.Found || rep.Found == 0 || len(rep.Diagnostics) != 0 {
			t.Errorf("import %s: %+v", job, rep)
		}
		name := filepath.Base(job)
		r, err := Load(store, Query{})
		if err != nil {
			t.Fatal(err)
		}
		want := trialRewards(t, job)
		seen := 0
		for _, g := range r.Groups {
			if g.Eval != "import/"+name {
				continue
			}
			if !g.Imported || g.Harness != "claude-code" {
				t.Errorf("group %s: imported %v", g.Name(), g.Imported)
			}
			for _, task := range g.Tasks {
				seen++
				if w, ok := want[task.Task]; !ok || task.Reward == nil || task.Reward.Mean != w {
					t.Errorf("%s task %s: reward %+v, result.json says %v", name, task.Task, task.Reward, w)
				}
			}
			if g.Usage == nil || g.Usage.InputTokens == 0 {
				t.Errorf("%s: no usage imported: %+v", name, g.Usage)
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d tasks shown, %d in the job", name, seen, len(want))
		}
		again, err := ImportHarbor(store, job, HarborOptions{})
		if err != nil || again.Added != 0 {
			t.Errorf("second import of %s: %+v, %v", job, again, err)
		}
	}
	// The legacy stats of these jobs (n_trials, n_errors) read as Harbor
	// reads them.
	if rep, err := store.Check(); err != nil || len(rep.Problems) > 0 {
		t.Errorf("state check: %v %v", err, rep.Problems)
	}
}

// TestImportNeverFollowsLinks: a trial file that is a symbolic link (to a
// secret outside the job) is reported and not stored; a trial whose
// result.json does not parse is reported by name; the rest is imported.
func TestImportNeverFollowsLinks(t *testing.T) {
	job := filepath.Join(t.TempDir(), "job1")
	good := filepath.Join(job, "hello__abc1234")
	bad := filepath.Join(job, "broken__xyz")
	for _, d := range []string{filepath.Join(good, "agent"), bad} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	_ = os.WriteFile(secret, []byte("do-not-import-me"), 0o600)
	_ = os.Symlink(secret, filepath.Join(good, "agent", "trajectory.json"))
	_ = os.Symlink(filepath.Dir(secret), filepath.Join(job, "linked-trial"))
	_ = os.WriteFile(filepath.Join(good, "result.json"), []byte(`{"id":"7e847602-99fb-42ca-a32f-23ea46842352","task_name":"hello","trial_name":"hello__abc1234",
"trial_uri":"","task_id":{"path":"hello"},"task_checksum":"x","config":{},"agent_info":{"name":"oracle","version":"1"},
"verifier_result":{"rewards":{"reward":1}},"started_at":"2026-08-13T12:00:00Z","finished_at":"2026-08-13T12:00:01.5Z"}`), 0o600)
	_ = os.WriteFile(filepath.Join(bad, "result.json"), []byte(`{"task_name": 3`), 0o600)

	store := writerStore(t)
	rep, err := ImportHarbor(store, job, HarborOptions{})
	if err != nil {
		t.Fatal(err)
	}
	diags := strings.Join(rep.Diagnostics, "\n")
	for _, want := range []string{"hello__abc1234/agent/trajectory.json: symbolic link, not followed", "linked-trial: symbolic link, not followed",
		"broken__xyz/result.json: not a Harbor trial result", "result.json: no such file or directory"} {
		if !strings.Contains(diags, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, diags)
		}
	}
	if rep.Added != 1 {
		t.Fatalf("added %d, want the one good trial", rep.Added)
	}
	a, err := store.CurrentAttempt("import/job1/oracle/hello#1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome.Class != state.ClassPassed || len(a.Outcome.Artifacts) != 1 || a.Outcome.Artifacts[0].Path != "result.json" {
		t.Errorf("imported attempt: class %s, artifacts %+v", a.Outcome.Class, a.Outcome.Artifacts)
	}
	if d := a.Outcome.FinishedAt.Sub(a.Outcome.StartedAt); d.Seconds() != 1.5 {
		t.Errorf("duration %v, want 1.5s", d)
	}

	// A symbolic link given as the job folder is refused.
	link := filepath.Join(t.TempDir(), "link")
	_ = os.Symlink(job, link)
	if _, err := ImportHarbor(store, link, HarborOptions{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("import of a link: %v", err)
	}
}
