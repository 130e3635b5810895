package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/executor"
	"github.com/hemra-dev/hemra/state"
)

// A warning beside the attempts (a superseded snapshot that could not be
// removed) reaches the operator in plain output, not only in -json.
func TestPlainViewShowsWarnings(t *testing.T) {
	var b strings.Builder
	v := &plainApplyView{w: &b}
	v.Event(executor.Event{Time: time.Now(), Type: executor.EventWarning, Address: "e/h/t#1", Error: "could not remove snapshot sha256:abc"})
	if got := b.String(); !strings.Contains(got, "warning: e/h/t#1: could not remove snapshot sha256:abc") {
		t.Fatalf("plain view printed %q, want the warning with its address and error", got)
	}
}

// screen replays what the live view wrote to a terminal: lines, with its
// "cursor up N lines, erase below" redraws applied.
func screen(out string) []string {
	var lines []string
	for len(out) > 0 {
		if strings.HasPrefix(out, "\x1b[") {
			end := strings.Index(out, "A\x1b[J")
			if end < 0 {
				break
			}
			var n int
			fmt.Sscanf(out[2:end], "%d", &n)
			lines = lines[:max(len(lines)-n, 0)]
			out = out[end+len("A\x1b[J"):]
			continue
		}
		i := strings.IndexByte(out, '\n')
		if i < 0 {
			lines = append(lines, out)
			break
		}
		lines = append(lines, out[:i])
		out = out[i+1:]
	}
	return lines
}

func reward(r float64) *float64 { return &r }

// TestLiveViewCountsInterrupted: interrupted attempts are neither done nor
// failures: they are counted apart and stay out of the pass rate. The
// interrupt notice goes above the block, and the block left on screen at
// the end lists no attempt as running.
func TestLiveViewCountsInterrupted(t *testing.T) {
	var b strings.Builder
	v := &liveView{w: &b, started: time.Now(), running: map[string]runningAttempt{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go v.loop()
	now := time.Now()
	v.Event(executor.Event{Time: now, Type: executor.EventRunStart, Planned: 4})
	for _, a := range []string{"e/h/a#1", "e/h/b#1", "e/h/c#1"} {
		v.Event(executor.Event{Time: now, Type: executor.EventAttemptStart, Address: a})
		v.Event(executor.Event{Time: now, Type: executor.EventAttemptStage, Address: a, Stage: "agent"})
	}
	v.Event(executor.Event{Time: now, Type: executor.EventAttemptFinish, Address: "e/h/a#1", Class: state.ClassPassed, Reward: reward(1)})
	v.mu.Lock()
	v.draw()
	v.mu.Unlock()
	v.Notice("\nInterrupt received: no new attempts start.")
	for _, a := range []string{"e/h/b#1", "e/h/c#1"} {
		v.Event(executor.Event{Time: now, Type: executor.EventAttemptFinish, Address: a, Class: state.ClassInterrupted})
	}
	v.Close()
	shown := screen(b.String())
	all := strings.Join(shown, "\n")
	head := shown[len(shown)-1]
	if !strings.Contains(head, "1/4 done") || !strings.Contains(head, "passed 100%") || !strings.Contains(head, "2 interrupted") || !strings.Contains(head, "1 queued") {
		t.Errorf("status line %q: want 1/4 done, passed 100%%, 2 interrupted, 1 queued", head)
	}
	if !strings.Contains(all, "Interrupt received") {
		t.Errorf("the notice is not on screen:\n%s", all)
	}
	for _, l := range shown {
		if strings.Contains(l, "  agent  ") {
			t.Errorf("a stale running line is left on screen: %q\n%s", l, all)
		}
	}
}

// TestSummaryCountsInterrupted: the summary says how many attempts
// finished, were interrupted and never started, and the table counts
// interrupted ones in their own column, not among the attempts (nor in the
// mean reward).
func TestSummaryCountsInterrupted(t *testing.T) {
	start := time.Now().UTC()
	store, err := state.Open(filepath.Join(t.TempDir(), ".hemra"), state.Options{Writer: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	run := &state.Run{Planned: 6}
	if err := store.BeginRun(run); err != nil {
		t.Fatal(err)
	}
	r := &executor.Report{RunID: run.ID, Planned: 6, Interrupted: true, StartedAt: start, FinishedAt: start.Add(time.Minute)}
	for i, c := range []state.Class{state.ClassPassed, state.ClassTaskFailure, state.ClassInterrupted} {
		a := executor.AttemptReport{Address: fmt.Sprintf("e/h/t%d#1", i), Eval: "e", Harness: "h", Class: c, StartedAt: start, Duration: time.Second}
		final := state.StatusInterrupted
		if c != state.ClassInterrupted {
			a.Reward = reward(map[state.Class]float64{state.ClassPassed: 1}[c])
			final = state.StatusFinished
		}
		r.Attempts = append(r.Attempts, a)
		rec := &state.Attempt{Address: a.Address, RunID: run.ID, Manifest: state.Manifest{Eval: "e", Harness: "h", Task: fmt.Sprintf("t%d", i), Repetition: 1},
			Transitions: []state.Transition{{Status: state.StatusPending, At: start}, {Status: final, At: start.Add(time.Second)}},
			Outcome:     &state.Outcome{Class: c, Reward: a.Reward, StartedAt: start, FinishedAt: start.Add(time.Second)}}
		if err := store.AddAttempt(rec); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	printSummary(&b, r, store)
	out := b.String()
	if !strings.Contains(out, "2 of 6 attempts finished, 1 interrupted, 3 not started") {
		t.Errorf("summary:\n%s\nwant 2 of 6 finished, 1 interrupted, 3 not started", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header, row := lines[len(lines)-2], lines[len(lines)-1]
	col := func(name string) string { // the value under a column of the table
		i := strings.Index(header, name)
		if i < 0 || i >= len(row) {
			return ""
		}
		return strings.Fields(row[i:])[0]
	}
	if col("ATTEMPTS") != "2" || col("INTERRUPTED") != "1" || col("MEAN REWARD") != "0.500" {
		t.Errorf("table:\n%s\n%s\nwant ATTEMPTS 2, INTERRUPTED 1, MEAN REWARD 0.500 (the interrupted one not counted)", header, row)
	}
}
