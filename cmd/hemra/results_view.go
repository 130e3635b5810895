package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hemra-dev/hemra/results"
	"github.com/hemra-dev/hemra/state"
)

// The text views of the results model (package results): every figure
// comes from it; these only lay it out. Output rules: three decimals, a
// 95% interval as [low, high] or "-" when there are too few attempts, one
// line per eval × harness or per task, names in order.

// writeGroups is the table of evals × harnesses: attempts, passes, mean
// reward with its interval, errored attempts (each counted as 0) and
// attempts still running.
func writeGroups(w io.Writer, groups []*results.Group) {
	var judges []string
	for _, g := range groups {
		judges = addNames(judges, g.Judges)
	}
	sort.Strings(judges)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EVAL\tHARNESS\tATTEMPTS\tPASSED\tPASS RATE\tMEAN REWARD\t95% CI\t"+judgeHeads(judges)+"ERRORED\tRUNNING")
	for _, g := range groups {
		cols := ""
		for _, name := range judges {
			cols += estimateMean(g.Judges[name]) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s%d\t%d\n", g.Eval, g.Harness, g.Attempts, g.Passed,
			percent(g.PassRate), estimateMean(g.Reward), results.Interval(g.Reward), cols, g.Errored, g.Running)
	}
	_ = tw.Flush()
	if errs := errorClasses(groups); errs != "" {
		fmt.Fprintf(w, "Errored attempts count as 0 in the mean reward (%s).\n", errs)
	}
}

// errorClasses says how the ended attempts without a reward ended, over
// all groups.
func errorClasses(groups []*results.Group) string {
	byClass := map[state.Class]int{}
	for _, g := range groups {
		if g.Errored == 0 {
			continue
		}
		for c, n := range g.ByClass {
			if c != state.ClassPassed && c != state.ClassTaskFailure {
				byClass[c] += n
			}
		}
	}
	var parts []string
	for c, n := range byClass {
		parts = append(parts, fmt.Sprintf("%d %s", n, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func percent(e *results.Estimate) string {
	if e == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*e.Mean)
}

func estimateMean(e *results.Estimate) string {
	if e == nil {
		return "-"
	}
	return results.Num(e.Mean)
}

const spaces = "                                                                "

// writeAttempts lists attempts, one line each, in columns. It pads the
// columns itself (widths first, then the lines) rather than through a
// tabwriter, which would hold every cell of 100,000 lines.
func writeAttempts(w io.Writer, attempts []*results.Attempt) {
	var judges []string
	for _, a := range attempts {
		judges = addNames(judges, a.Judges)
	}
	sort.Strings(judges)
	head := append([]string{"ATTEMPT", "STATUS", "CLASS", "REWARD"}, strings.Split(judgeHeads(judges)+"TIME", "\t")...)
	head = slices.DeleteFunc(head, func(h string) bool { return h == "" })
	// cells fills one line's cells into row, reused from line to line.
	row := make([]string, len(head))
	cells := func(a *results.Attempt) []string {
		row[0], row[1], row[2], row[3] = a.Address, string(a.Status), orDash(string(a.Class)), "-"
		if a.Reward != nil {
			row[3] = formatReward(*a.Reward)
		}
		for i, name := range judges {
			j, ok := a.Judges[name]
			switch {
			case !ok:
				row[4+i] = "-"
			case j.Score == nil:
				row[4+i] = "error" // a failed judge is never a 0
			default:
				row[4+i] = formatReward(*j.Score)
			}
		}
		row[len(row)-1] = "-"
		if a.Duration > 0 {
			row[len(row)-1] = roundDuration(time.Duration(a.Duration * float64(time.Second))).String()
		}
		return row
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
	}
	for _, a := range attempts {
		for i, c := range cells(a) {
			width[i] = max(width[i], len(c))
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	line := func(cells []string) {
		for i, c := range cells {
			bw.WriteString(c)
			if i == len(cells)-1 {
				break
			}
			for pad := width[i] - len(c) + 2; pad > 0; pad -= len(spaces) {
				bw.WriteString(spaces[:min(pad, len(spaces))])
			}
		}
		bw.WriteByte('\n')
	}
	line(head)
	for _, a := range attempts {
		line(cells(a))
	}
	_ = bw.Flush()
}

// addNames adds the keys of m not in names yet.
func addNames[V any](names []string, m map[string]V) []string {
	for name := range m {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// judgeHeads are the column headings of judges, each followed by a tab.
func judgeHeads(judges []string) string {
	var b strings.Builder
	for _, name := range judges {
		b.WriteString("JUDGE " + strings.ToUpper(name) + "\t")
	}
	return b.String()
}

// writeGroupDetail is one eval × harness: its totals, pass@k, every reward
// key and judge, usage, and a line per task.
func writeGroupDetail(w io.Writer, g *results.Group) {
	kind := ""
	if g.Imported {
		kind = " (imported)"
	}
	fmt.Fprintf(w, "%s%s: %d attempts on %d tasks, %d passed, %d errored, %d running\n",
		g.Name(), kind, g.Attempts, len(g.Tasks), g.Passed, g.Errored, g.Running)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  mean reward\t%s\t%s\t%s\n", estimateMean(g.Reward), results.Interval(g.Reward), seNote(g.Reward))
	fmt.Fprintf(tw, "  pass rate\t%s\t%s\t%s\n", estimateMean(g.PassRate), results.Interval(g.PassRate), seNote(g.PassRate))
	for _, k := range sortedKeys(g.RewardKeys) {
		fmt.Fprintf(tw, "  reward %s\t%s\t%s\t\n", k, estimateMean(g.RewardKeys[k]), results.Interval(g.RewardKeys[k]))
	}
	for _, k := range sortedKeys(g.Judges) {
		e := g.Judges[k]
		fmt.Fprintf(tw, "  judge %s\t%s\t%s\tover %d scored attempts\n", k, estimateMean(e), results.Interval(e), e.N)
	}
	_ = tw.Flush()
	if len(g.PassAtK) > 0 {
		parts := make([]string, len(g.PassAtK))
		for i, p := range g.PassAtK {
			parts[i] = fmt.Sprintf("pass@%d %s", p.K, results.Num(p.Value))
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, "  "))
	}
	if u := g.Usage; u != nil {
		fmt.Fprintf(w, "  usage (%d attempts reported it): %d input, %d output, %d cache tokens, $%.4f\n",
			u.Attempts, u.InputTokens, u.OutputTokens, u.CacheTokens, u.CostUSD)
	}
	d := g.Durations
	fmt.Fprintf(w, "  time: %s in total, %s per attempt, %s wall\n", seconds(d.Total), seconds(d.Mean), seconds(d.Wall))
	if errs := errorClasses([]*results.Group{g}); errs != "" {
		fmt.Fprintf(w, "  errored attempts count as 0 (%s)\n", errs)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tATTEMPTS\tPASSED\tERRORED\tMEAN REWARD\t95% CI")
	for _, t := range g.Tasks {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", t.Task, t.Attempts, t.Passed, t.Errored, estimateMean(t.Reward), results.Interval(t.Reward))
	}
	_ = tw.Flush()
}

func seNote(e *results.Estimate) string {
	if !e.HasInterval() {
		return ""
	}
	if e.Clustered {
		return fmt.Sprintf("SE %s, clustered by task", results.Num(e.SE))
	}
	return "SE " + results.Num(e.SE)
}

func seconds(s float64) string {
	return roundDuration(time.Duration(s * float64(time.Second))).String()
}
