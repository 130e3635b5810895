package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/state"
	"github.com/hemra-dev/hemra/state/statetest"
)

// scanStore is a store whose figures depend on the order of their
// floating-point sums (rewards of 0.1, 0.2 and 0.7, several attempts per
// task), with judges, errored, interrupted and running attempts, two
// harnesses, imported attempts and one run of them all. With unordered,
// it also has tasks whose addresses sort in another order than their
// names ("t" and "t!": "t!#1" < "t#1"), after two others (a sum of two
// terms is the same in either order).
func scanStore(t *testing.T, unordered bool) (*state.Store, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := state.Open(dir, state.Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	run := &state.Run{Planned: 1}
	if err := w.BeginRun(run); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rewards := []float64{0.1, 0.2, 0.7, 1, 0.3}
	tasks := []string{"a", "b", "t", "u", "v-1", "v"}
	if unordered {
		tasks = append(tasks, "t!", "u!")
	}
	var as []*state.Attempt
	i := 0
	for _, addrPrefix := range []string{"e/h", "e/h2", "import/job/agent"} {
		for _, task := range tasks {
			for n := 1; n <= 3; n++ {
				i++
				a := statetest.Attempt(fmt.Sprintf("%s/%s#%d", addrPrefix, task, n), fmt.Sprint("fp", i))
				a.Manifest.Task, a.Manifest.Repetition = task, n
				if strings.HasPrefix(addrPrefix, "import/") {
					a.Manifest.Eval, a.Manifest.Harness = "import/job", "agent"
					a.Origin = &state.Origin{Format: "harbor", Job: "job", ImportedAt: at}
				}
				a.RunID = run.ID
				r := rewards[i%len(rewards)]
				o := &state.Outcome{Class: state.ClassPassed, Reward: &r, StartedAt: at, FinishedAt: at.Add(time.Duration(i) * time.Second)}
				status := state.StatusFinished
				switch i % 7 {
				case 3:
					o.Class, o.Reward, status = state.ClassInfraError, nil, state.StatusErrored
				case 5:
					o.Class, o.Reward, status = state.ClassInterrupted, nil, state.StatusInterrupted
				case 6:
					status, o = state.StatusAgent, nil
				}
				if o != nil && i%2 == 0 {
					score := rewards[(i/2)%len(rewards)]
					o.Judges = map[string]state.JudgeScore{"quality": {Score: &score}, "broken": {Error: "refused"}}
					if i%4 == 0 {
						o.Judges["style"] = state.JudgeScore{Score: &r}
					}
				}
				a.Transitions = []state.Transition{{Status: status, At: at}}
				a.Outcome = o
				as = append(as, a)
			}
		}
	}
	// Added in another order than their addresses, as a run with many
	// attempts in flight records them.
	for j := len(as) - 1; j >= 0; j -= 2 {
		if err := w.AddAttempt(as[j]); err != nil {
			t.Fatal(err)
		}
	}
	for j := len(as) - 2; j >= 0; j -= 2 {
		if err := w.AddAttempt(as[j]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, run.ID
}

// TestScanAgreesWithLoad: Scan gives the figures Load gives (to the last
// bit) and every attempt in the order of Load's list, for the latest
// results, a group, and a run read both ways (sorted in memory, and from
// the history in address order), with tasks in order and out of it.
func TestScanAgreesWithLoad(t *testing.T) {
	for _, unordered := range []bool{false, true} {
		store, runID := scanStore(t, unordered)
		for _, q := range []Query{{}, {Group: "e/h2"}, {Group: "import/job/agent"}, {Run: runID}, {Run: runID, Group: "e/h"}} {
			for _, keepBelow := range []int{1 << 16, 0} {
				name := fmt.Sprintf("unordered=%v %s keepRunBelow=%d", unordered, q, keepBelow)
				keepRunBelow = keepBelow
				want, err := Load(store, q)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				r, err := Scan(store, q, func(a *Attempt) error {
					got = append(got, attemptJSON(t, a))
					return nil
				})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var list []string
				for _, a := range want.Attempts {
					list = append(list, attemptJSON(t, a))
				}
				if !reflect.DeepEqual(got, list) {
					t.Errorf("%s: attempts\n%v\nwant\n%v", name, got, list)
				}
				want.Attempts = nil
				for _, g := range want.Groups {
					g.Tasks, g.PassAtK, g.RewardKeys, g.Usage, g.Durations = nil, nil, nil, nil, Durations{}
				}
				if !reflect.DeepEqual(r, want) {
					t.Errorf("%s: results\n%s\nwant\n%s", name, dump(r), dump(want))
				}
			}
		}
	}
	keepRunBelow = 1 << 16
}

func attemptJSON(t *testing.T, a *Attempt) string {
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func dump(r *Results) string {
	s := fmt.Sprintf("%+v\n", *r)
	for _, g := range r.Groups {
		s += fmt.Sprintf("  %+v reward %+v pass %+v\n", *g, *g.Reward, *g.PassRate)
		for name, j := range g.Judges {
			s += fmt.Sprintf("    judge %s %+v\n", name, *j)
		}
	}
	return s
}

// TestScanMissingGroupAndRun: what Load refuses, Scan refuses alike.
func TestScanMissingGroupAndRun(t *testing.T) {
	store, _ := scanStore(t, false)
	none := func(*Attempt) error { return nil }
	if _, err := Scan(store, Query{Group: "e/nope"}, none); err == nil || !strings.Contains(err.Error(), "no attempts of e/nope") {
		t.Errorf("missing group: %v", err)
	}
	if _, err := Scan(store, Query{Run: "nope"}, none); !errors.Is(err, ErrNoRun) || !errors.Is(err, state.ErrNotFound) {
		t.Errorf("missing run: %v", err)
	}
}
