package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hemra-dev/hemra/state"
)

// writeJudges prints an attempt's judges — score, model, each criterion
// with its reasoning, each model call — and the criteria of a rewardkit
// verifier. Reasoning and other model output are printed as plain text
// (control characters made spaces): they can quote the agent's work.
func writeJudges(w io.Writer, o *state.Outcome) {
	names := make([]string, 0, len(o.Judges))
	for n := range o.Judges {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		j := o.Judges[n]
		fmt.Fprintf(w, "\nJudge %s: %s\n", n, judgeText(j))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  model\t%s (%s, %s)\n", plainText(orDash(j.Model)), orDash(j.Provider), orDash(j.API))
		if j.ErrorKind != "" {
			fmt.Fprintf(tw, "  error kind\t%s\n", j.ErrorKind)
		}
		if j.Aggregation != "" {
			fmt.Fprintf(tw, "  aggregation\t%s\n", j.Aggregation)
		}
		_ = tw.Flush()
		writeCriteria(w, j.Criteria)
		if len(j.Calls) > 0 {
			fmt.Fprintln(w, "  Model calls:")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, c := range j.Calls {
				tokens := fmt.Sprintf("%d in / %d out", c.InputTokens, c.OutputTokens)
				if c.CostUSD != nil {
					tokens += fmt.Sprintf(", $%.4f", *c.CostUSD)
				}
				status := fmt.Sprint(c.Status)
				if c.Refused != "" {
					status += " refused (" + c.Refused + ")"
				}
				if c.Timeout {
					status += " timeout"
				}
				fmt.Fprintf(tw, "    %d\t%s %s\t%s\t%s\t%s\t%s\n", c.Seq, orDash(c.Method), c.Path, plainText(orDash(c.Model)), status,
					roundDuration(c.Duration).String(), tokens)
				if c.Error != "" {
					fmt.Fprintf(tw, "    \t%s\t\t\t\t\n", plainText(c.Error))
				}
			}
			_ = tw.Flush()
		}
	}
	if d := o.RewardDetails; d != nil {
		fmt.Fprintf(w, "\nRewardkit (reward-details.json, blob %s):\n", short(d.Blob))
		for _, r := range d.Rewards {
			score := "-"
			if r.Score != nil {
				score = formatReward(*r.Score)
			}
			judge := ""
			if r.Judge != "" {
				judge = ", judge " + plainText(r.Judge)
			}
			fmt.Fprintf(w, "  %s: %s (%s%s)\n", plainText(r.Name), score, orDash(r.Kind), judge)
			writeCriteria(w, r.Criteria)
		}
	}
}

func writeCriteria(w io.Writer, cs []state.CriterionScore) {
	if len(cs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cs {
		v := "-"
		switch {
		case c.Skipped:
			v = "skipped"
		case c.Value != nil:
			v = formatReward(*c.Value)
		}
		raw := ""
		if len(c.Raw) > 0 {
			raw = " (" + plainText(strings.TrimSpace(string(c.Raw))) + ")"
		}
		fmt.Fprintf(tw, "    %s\t%s%s\t%s\n", plainText(c.Name), v, raw, plainText(c.Reasoning))
	}
	_ = tw.Flush()
}
