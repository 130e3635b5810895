package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hemra-dev/hemra/state"
)

// showResults renders the store: the latest results per eval × harness
// (no argument), one attempt (an address or an attempt id) with its
// transitions, outcome, events and artifacts, or one run (a run id).
func (c *ShowCmd) showResults(g *Globals) error {
	store, err := state.Open(g.StorePath(), state.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if c.Path == "" {
		return c.showLatest(g, store)
	}
	if a, err := findAttempt(store, c.Path); err == nil {
		return c.showAttempt(g, store, a)
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if r, err := store.Run(c.Path); err == nil {
		return c.showRun(g, store, r)
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%q is not a plan file, an attempt address, an attempt id or a run id in %s.\nhemra state list shows the addresses; hemra runs shows the runs", c.Path, g.StorePath())
}

// findAttempt takes an address (its current attempt) or an attempt id.
func findAttempt(store *state.Store, ref string) (*state.Attempt, error) {
	if strings.Contains(ref, "/") {
		return store.CurrentAttempt(ref)
	}
	return store.Attempt(ref)
}

// resultGroup is one eval × harness of the latest results.
type resultGroup struct {
	Eval        string   `json:"eval"`
	Harness     string   `json:"harness"`
	Attempts    int      `json:"attempts"`
	Passed      int      `json:"passed"`
	MeanReward  *float64 `json:"mean_reward"`
	Errors      int      `json:"errors"` // infra, protocol and verifier errors
	Interrupted int      `json:"interrupted"`
	rewardSum   float64
	rewarded    int
}

type latestAttempt struct {
	Address   string       `json:"address"`
	AttemptID string       `json:"attempt_id"`
	Status    state.Status `json:"status"`
	Class     state.Class  `json:"class,omitempty"`
	Reward    *float64     `json:"reward,omitempty"`
	Error     string       `json:"error,omitempty"`
	Duration  float64      `json:"duration_seconds,omitempty"`
}

func (c *ShowCmd) showLatest(g *Globals, store *state.Store) error {
	groups := map[[2]string]*resultGroup{}
	var list []latestAttempt
	add := func(addr string, a *state.Attempt) {
		k := [2]string{a.Manifest.Eval, a.Manifest.Harness}
		gr := groups[k]
		if gr == nil {
			gr = &resultGroup{Eval: k[0], Harness: k[1]}
			groups[k] = gr
		}
		gr.Attempts++
		la := latestAttempt{Address: addr, AttemptID: a.ID, Status: a.Status()}
		if o := a.Outcome; o != nil {
			la.Class, la.Reward, la.Error = o.Class, o.Reward, o.Error
			if !o.FinishedAt.IsZero() && !o.StartedAt.IsZero() {
				la.Duration = o.FinishedAt.Sub(o.StartedAt).Seconds()
			}
			if o.Reward != nil {
				gr.rewarded++
				gr.rewardSum += *o.Reward
				if *o.Reward >= 1 {
					gr.Passed++
				}
			}
			switch o.Class {
			case state.ClassInfraError, state.ClassProtocolError, state.ClassVerifierError:
				gr.Errors++
			case state.ClassInterrupted:
				gr.Interrupted++
			}
		}
		list = append(list, la)
	}
	// One read transaction for the whole listing: one open of state.db
	// whatever the number of addresses, and a consistent picture while an
	// apply writes. Each record is summarised as it is read.
	err := store.View(func(v *state.View) error {
		return v.ForEachCurrent(func(addr string, _ state.Current) error {
			a, err := v.CurrentAttempt(addr)
			if err != nil {
				return err
			}
			add(addr, a)
			return nil
		})
	})
	if err != nil {
		return err
	}
	out := make([]*resultGroup, 0, len(groups))
	for _, gr := range groups {
		if gr.rewarded > 0 {
			m := gr.rewardSum / float64(gr.rewarded)
			gr.MeanReward = &m
		}
		out = append(out, gr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Eval != out[j].Eval {
			return out[i].Eval < out[j].Eval
		}
		return out[i].Harness < out[j].Harness
	})
	if c.JSON {
		return writeJSON(g.Stdout, map[string]any{"groups": out, "attempts": list})
	}
	if len(list) == 0 {
		fmt.Fprintln(g.Stdout, "No attempts recorded yet. Run hemra apply.")
		return nil
	}
	tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EVAL\tHARNESS\tATTEMPTS\tPASSED\tPASS RATE\tMEAN REWARD\tERRORS\tINTERRUPTED")
	for _, gr := range out {
		mean := "-"
		if gr.MeanReward != nil {
			mean = fmt.Sprintf("%.3f", *gr.MeanReward)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f%%\t%s\t%d\t%d\n", gr.Eval, gr.Harness, gr.Attempts, gr.Passed,
			100*float64(gr.Passed)/float64(gr.Attempts), mean, gr.Errors, gr.Interrupted)
	}
	_ = tw.Flush()
	fmt.Fprintln(g.Stdout)
	tw = tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tSTATUS\tCLASS\tREWARD\tTIME")
	for _, la := range list {
		reward := "-"
		if la.Reward != nil {
			reward = formatReward(*la.Reward)
		}
		d := "-"
		if la.Duration > 0 {
			d = roundDuration(time.Duration(la.Duration * float64(time.Second))).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", la.Address, la.Status, orDash(string(la.Class)), reward, d)
	}
	return tw.Flush()
}

// showAttempt prints one attempt: identity, outcome, transitions, events
// and artifacts.
func (c *ShowCmd) showAttempt(g *Globals, store *state.Store, a *state.Attempt) error {
	logPath := store.EventLogPath(a.ID)
	if a.Outcome != nil && a.Outcome.EventsLog != "" && a.Manifest.ReusedAgentFrom == "" {
		logPath = filepath.Join(store.Dir(), filepath.FromSlash(a.Outcome.EventsLog))
	}
	events, truncated, err := readEventLog(logPath, showEventLimit)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if c.JSON {
		return writeJSON(g.Stdout, map[string]any{"attempt": a, "events": events, "events_truncated": truncated})
	}
	w := g.Stdout
	fmt.Fprintf(w, "Attempt %s\n", a.Address)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  id\t%s\n", a.ID)
	fmt.Fprintf(tw, "  run\t%s\n", a.RunID)
	fmt.Fprintf(tw, "  status\t%s\n", a.Status())
	m := a.Manifest
	fmt.Fprintf(tw, "  sandbox\t%s\n", orDash(m.Sandbox.Kind))
	if len(m.EnvNames) > 0 {
		fmt.Fprintf(tw, "  env names\t%s\n", strings.Join(m.EnvNames, ", "))
	}
	fmt.Fprintf(tw, "  fingerprints\tagent %s, verify %s, judge %s\n", short(m.AgentFingerprint), short(m.VerifyFingerprint), short(m.JudgeFingerprint))
	if m.ReusedAgentFrom != "" {
		fmt.Fprintf(tw, "  agent reused from\t%s\n", m.ReusedAgentFrom)
	}
	if o := a.Outcome; o != nil {
		fmt.Fprintf(tw, "  class\t%s\n", o.Class)
		if o.Reward != nil {
			fmt.Fprintf(tw, "  reward\t%s%s\n", formatReward(*o.Reward), rewardsText(o.Rewards))
		}
		if o.Error != "" {
			fmt.Fprintf(tw, "  error\t%s\n", o.Error)
		}
		fmt.Fprintf(tw, "  time\t%s → %s (%s)\n", o.StartedAt.Local().Format(time.DateTime), o.FinishedAt.Local().Format(time.TimeOnly),
			roundDuration(o.FinishedAt.Sub(o.StartedAt)))
		if len(o.AgentResult) > 0 {
			fmt.Fprintf(tw, "  output\t%s\n", firstLine(string(o.AgentResult), 200))
		}
		if o.AgentExit != 0 {
			fmt.Fprintf(tw, "  agent exit\t%d\n", o.AgentExit)
		}
		for name, j := range o.Judges {
			fmt.Fprintf(tw, "  judge %s\t%s\n", name, judgeText(j))
		}
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nTransitions:")
	for _, t := range a.Transitions {
		note := ""
		if t.Note != "" {
			note = "  " + t.Note
		}
		fmt.Fprintf(w, "  %s  %s%s\n", t.At.Local().Format("15:04:05.000"), t.Status, note)
	}
	if a.Outcome != nil && a.Outcome.StderrTail != "" {
		fmt.Fprintln(w, "\nStderr (tail):")
		for _, l := range strings.Split(strings.TrimRight(lastLines(a.Outcome.StderrTail, 10), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "\nEvents (%s):\n", relOrAbs(store.Dir(), logPath))
	if len(events) == 0 {
		fmt.Fprintln(w, "  none")
	}
	if truncated > 0 {
		fmt.Fprintf(w, "  ... %d earlier lines (hemra show -json, or read the file)\n", truncated)
	}
	for _, ev := range events {
		fmt.Fprintf(w, "  %s\n", eventText(ev))
	}
	if a.Outcome != nil && len(a.Outcome.Artifacts) > 0 {
		fmt.Fprintln(w, "\nArtifacts:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, art := range a.Outcome.Artifacts {
			fmt.Fprintf(tw, "  %s\t%d B\t%s\n", art.Path, art.Size, relOrAbs(store.Dir(), store.BlobPath(art.SHA256)))
		}
		_ = tw.Flush()
	}
	return nil
}

// showRun prints one run and its attempts.
func (c *ShowCmd) showRun(g *Globals, store *state.Store, r *state.Run) error {
	var attempts []*state.Attempt
	err := store.View(func(v *state.View) error {
		for _, id := range r.Attempts {
			a, err := v.Attempt(id)
			if err != nil {
				return err
			}
			attempts = append(attempts, a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(g.Stdout, map[string]any{"run": r, "attempts": attempts})
	}
	fmt.Fprintf(g.Stdout, "Run %s: %s, started %s by pid %d on %s, %d of %d planned attempts\n\n",
		r.ID, r.Status, r.StartedAt.Local().Format(time.DateTime), r.PID, r.Host, len(r.Attempts), r.Planned)
	tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tID\tSTATUS\tCLASS\tREWARD")
	for _, a := range attempts {
		class, reward := "-", "-"
		if a.Outcome != nil {
			class = string(a.Outcome.Class)
			if a.Outcome.Reward != nil {
				reward = formatReward(*a.Outcome.Reward)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Address, a.ID, a.Status(), class, reward)
	}
	return tw.Flush()
}

// showEventLimit is how many event lines hemra show prints.
const showEventLimit = 200

// readEventLog reads the last limit lines of an event log, each as JSON,
// and how many earlier lines were left out.
func readEventLog(path string, limit int) ([]json.RawMessage, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var lines []json.RawMessage
	total := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 2<<20)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		total++
		if !json.Valid(b) {
			// A line cut by a crash: shown as what it is.
			b, _ = json.Marshal(map[string]string{"unreadable": string(b)})
		}
		lines = append(lines, append(json.RawMessage(nil), b...))
		if len(lines) > limit {
			lines = lines[1:]
		}
	}
	return lines, total - len(lines), sc.Err()
}

// eventText is one event log line in a few words.
func eventText(raw json.RawMessage) string {
	var l struct {
		T     time.Time `json:"t"`
		Seq   int       `json:"seq"`
		Event struct {
			Type   string          `json:"type"`
			Kind   string          `json:"kind"`
			Status string          `json:"status"`
			Data   json.RawMessage `json:"data"`
			Output json.RawMessage `json:"output"`
		} `json:"event"`
		Hemra *struct {
			Type  string `json:"type"`
			Stage string `json:"stage"`
			Note  string `json:"note"`
			Exit  *int   `json:"exit"`
		} `json:"hemra"`
		Unreadable string `json:"unreadable"`
	}
	if err := json.Unmarshal(raw, &l); err != nil || l.Unreadable != "" {
		return "unreadable line: " + firstLine(string(raw), 120)
	}
	ts := l.T.Local().Format("15:04:05.000")
	if h := l.Hemra; h != nil {
		s := fmt.Sprintf("%s  hemra  %s", ts, h.Type)
		if h.Stage != "" {
			s += " " + h.Stage
		}
		if h.Exit != nil {
			s += fmt.Sprintf(" exit %d", *h.Exit)
		}
		if h.Note != "" {
			s += ": " + firstLine(h.Note, 120)
		}
		return s
	}
	e := l.Event
	switch e.Type {
	case "event":
		return fmt.Sprintf("%s  #%d  %s %s", ts, l.Seq, e.Kind, firstLine(string(e.Data), 120))
	case "result":
		return fmt.Sprintf("%s  #%d  result %s %s", ts, l.Seq, e.Status, firstLine(string(e.Output), 120))
	}
	return fmt.Sprintf("%s  #%d  %s", ts, l.Seq, e.Type)
}

func rewardsText(m map[string]float64) string {
	if len(m) <= 1 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + formatReward(m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func judgeText(j state.JudgeScore) string {
	if j.Error != "" {
		return "not scored: " + j.Error
	}
	return formatReward(j.Score)
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return orDash(fp)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func relOrAbs(base, p string) string {
	if rel, err := filepath.Rel(base, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return p
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
