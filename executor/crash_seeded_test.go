package executor_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/state"
)

// crashRounds bounds TestCrashAtSeededMoments: each round is one apply
// killed with SIGKILL at a random moment.
const crashRounds = 12

// TestCrashAtSeededMoments SIGKILLs `hemra apply` at crashRounds moments
// drawn from a seeded generator (seed 13; HEMRA_CRASH_SEED=N draws others), anywhere from before the store is opened to the middle of
// attempts and their commits. After every kill: the store passes its
// consistency check, every attempt that had finished before is still
// recorded exactly as it was, and no address has two finished attempts
// (nothing ran twice). A final apply retries what was interrupted and
// runs what never started; then every address has one finished, passing
// current attempt and the plan has nothing left to do.
func TestCrashAtSeededMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hemra and runs it a dozen times")
	}
	seed := uint64(13)
	if s := os.Getenv("HEMRA_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HEMRA_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))

	const n = 10
	bin := buildHemra(t)
	dir := slowEval(t, n)
	// Each attempt takes 0.8 s: the ten need several rounds, so most
	// moments fall in the middle of attempts.
	if err := os.WriteFile(dir+"/slow", []byte("0.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, dir)
	e.hcl = []string{"here=" + dir}

	finished := map[string]string{} // attempt id -> its outcome, as first seen finished
	kills := 0
	for round := range crashRounds {
		cmd := exec.Command(bin, "-chdir", dir, "apply", "-auto-approve", "-parallelism", "2", "-var", "here="+dir)
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wait := time.Duration(rng.IntN(1500)) * time.Millisecond
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done: // finished before its moment: nothing left to kill
			t.Logf("round %d: finished within %s", round, wait)
		case <-time.After(wait):
			_ = cmd.Process.Signal(os.Kill)
			<-done
			kills++
			t.Logf("round %d: killed after %s", round, wait)
		}

		checkStore(t, e.store, false)
		st, err := state.Open(e.store, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		perAddr := map[string]int{}
		seen := map[string]bool{}
		err = st.ForEachCurrent(func(addr string, _ state.Current) error {
			hist, err := st.History(addr)
			if err != nil {
				return err
			}
			for _, a := range hist {
				seen[a.ID] = true
				if a.Status() != state.StatusFinished {
					continue
				}
				perAddr[addr]++
				out := outcomeKey(a)
				if prev, ok := finished[a.ID]; ok && prev != out {
					t.Errorf("round %d: finished attempt %s changed: %s, was %s", round, a.ID, out, prev)
				}
				finished[a.ID] = out
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for id := range finished {
			if !seen[id] {
				t.Errorf("round %d: finished attempt %s is gone", round, id)
			}
		}
		for addr, c := range perAddr {
			if c > 1 {
				t.Errorf("round %d: %s has %d finished attempts: an attempt ran twice", round, addr, c)
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	if kills == 0 {
		t.Fatalf("no apply was killed (seed %d)", seed)
	}

	rep, _ := e.apply(context.Background(), 4)
	for _, a := range rep.Attempts {
		if a.Class != state.ClassPassed {
			t.Errorf("%s: %s %s", a.Address, a.Class, a.Error)
		}
	}
	if plan, _ := e.plan(); plan.Summary.Changes() {
		t.Fatalf("after the final apply the plan has changes: %+v (seed %d)", plan.Summary, seed)
	}
	checkStore(t, e.store, true)
}

// outcomeKey is what must never change about a finished attempt.
func outcomeKey(a *state.Attempt) string {
	o := a.Outcome
	if o == nil {
		return a.Address + " no outcome"
	}
	r := "-"
	if o.Reward != nil {
		r = strconv.FormatFloat(*o.Reward, 'g', -1, 64)
	}
	return a.Address + " " + string(o.Class) + " " + r + " " + o.FinishedAt.String() + " " + strconv.Itoa(len(a.Transitions))
}
