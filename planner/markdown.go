package planner

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// MarkdownLimit is GitHub's limit on one comment. RenderMarkdown stays
// under it, with room to spare for a bot's own wrapping.
const MarkdownLimit = 65536

const markdownBudget = MarkdownLimit - 2048

// RenderMarkdown writes the plan as a pull-request comment: the summary
// line and counts first, orphans called out, then one collapsed
// <details> section per eval with its attempts as a diff block. When the
// whole would pass GitHub's 65,536-character limit, sections are cut and
// a note says how many attempts are not shown and where to see them.
func RenderMarkdown(w io.Writer, p *Plan) error {
	var head bytes.Buffer
	fmt.Fprintf(&head, "### hemra plan\n\n**%s**\n\n", SummaryLine(p))
	if note := RunningApplyNote(p); note != "" {
		fmt.Fprintf(&head, "> [!WARNING]\n> %s\n\n", mdEscape(note))
	}
	s := p.Summary
	if s.Changes() || s.Orphaned > 0 {
		head.WriteString("| | action | attempts |\n|---|---|---:|\n")
		rows := []struct {
			sym, word string
			n         int
		}{
			{"+", "run", s.Run}, {"-/+", "re-run", s.Rerun}, {"~", "re-verify", s.Reverify},
			{"~", "re-judge", s.Rejudge}, {"!", "retry", s.Retry}, {"", "unchanged", s.Unchanged},
			{"-", "orphaned (kept in state)", s.Orphaned},
		}
		for _, r := range rows {
			if r.n == 0 && r.word != "unchanged" {
				continue
			}
			sym := ""
			if r.sym != "" {
				sym = "`" + r.sym + "`"
			}
			fmt.Fprintf(&head, "| %s | %s | %d |\n", sym, r.word, r.n)
		}
		head.WriteString("\n")
	}
	if s.Orphaned > 0 {
		fmt.Fprintf(&head, "> [!WARNING]\n> %d %s left the configuration and %s orphaned. Nothing is deleted; their results stay in state.\n\n",
			s.Orphaned, plural(s.Orphaned, "attempt", "attempts"), plural(s.Orphaned, "is", "are"))
	}
	if len(p.Images) > 0 {
		head.WriteString("<details><summary>Images</summary>\n\n| image | digest | source |\n|---|---|---|\n")
		for _, im := range p.Images {
			d := "`" + im.Digest + "`"
			if im.Previous != "" && im.Previous != im.Digest {
				d = "`" + im.Previous + "` → " + d
			}
			fmt.Fprintf(&head, "| `%s` | %s | %s |\n", mdEscape(im.Reference), d, sourceWords(im.Source))
		}
		head.WriteString("\n</details>\n\n")
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&head, "> **Note:** %s\n\n", mdEscape(n))
	}

	// One section per eval.
	type section struct {
		eval     string
		attempts []*PlannedAttempt
	}
	var sections []*section
	for _, a := range p.Attempts {
		if a.Action == ActionNoop {
			continue
		}
		if len(sections) == 0 || sections[len(sections)-1].eval != a.Eval {
			sections = append(sections, &section{eval: a.Eval})
		}
		sec := sections[len(sections)-1]
		sec.attempts = append(sec.attempts, a)
	}

	out := head
	hidden := 0
	truncated := false
	for _, sec := range sections {
		if truncated {
			hidden += len(sec.attempts)
			continue
		}
		var counts Summary
		for _, a := range sec.attempts {
			counts.add(a.Action)
		}
		open := fmt.Sprintf("<details><summary><b>%s</b>: %s</summary>\n\n```diff", mdEscape(sec.eval), countWords(counts))
		closing := "```\n\n</details>\n\n"
		if out.Len()+len(open)+len(closing) > markdownBudget {
			truncated = true
			hidden += len(sec.attempts)
			continue
		}
		out.WriteString(open)
		var prev *PlannedAttempt
		for i, a := range sec.attempts {
			var buf bytes.Buffer
			ew := &errWriter{w: &buf}
			if prev != nil && prev.Harness != a.Harness {
				prev = nil
			}
			writeAttempt(ew, a, prev, true, func(_, s string) string { return s })
			prev = a
			block := strings.ReplaceAll(buf.String(), "```", "`\u200b``")
			if out.Len()+len(block)+len(closing) > markdownBudget {
				truncated = true
				hidden += len(sec.attempts) - i
				break
			}
			out.WriteString(block)
		}
		out.WriteString(closing)
	}
	if truncated {
		fmt.Fprintf(&out, "> [!NOTE]\n> Output truncated to stay under GitHub's %d-character comment limit: %d %s not shown. Run `hemra plan` (or `hemra show -json PLANFILE`) for every attempt.\n",
			MarkdownLimit, hidden, plural(hidden, "attempt is", "attempts are"))
	}
	_, err := w.Write(out.Bytes())
	return err
}

// countWords is a section's counts, non-zero ones only.
func countWords(s Summary) string {
	var parts []string
	add := func(n int, w string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, w))
		}
	}
	add(s.Run, "to run")
	add(s.Rerun, "to re-run")
	add(s.Reverify, "to re-verify")
	add(s.Rejudge, "to re-judge")
	add(s.Retry, "to retry")
	add(s.Orphaned, "orphaned")
	return strings.Join(parts, ", ")
}

// mdEscape keeps names from opening HTML or Markdown constructs.
func mdEscape(s string) string {
	r := strings.NewReplacer("<", "&lt;", ">", "&gt;", "|", "\\|")
	return r.Replace(s)
}
