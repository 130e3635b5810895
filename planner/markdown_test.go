package planner_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// TestMarkdownGoldensRenderOnGitHub renders every Markdown golden with a
// CommonMark + GFM renderer (what GitHub and GitLab use) and checks what a
// reviewer sees: every code block is a fenced diff block at column 0 that
// holds a valid unified diff (so no action line, which would start with
// "-" or "+", is inside one), the counts table is a table, and the
// <details> sections are balanced.
func TestMarkdownGoldensRenderOnGitHub(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/plan*.md")
	if len(files) == 0 {
		t.Fatal("no Markdown goldens")
	}
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			checkMarkdown(t, md, src)
		})
	}
}

func checkMarkdown(t *testing.T, md goldmark.Markdown, src []byte) {
	t.Helper()
	if len(src) >= 65536 {
		t.Errorf("%d characters: over GitHub's comment limit", len(src))
	}
	if !bytes.HasPrefix(src, []byte("<!-- hemra plan")) {
		t.Errorf("does not open with the hemra plan marker: %.60q", src)
	}
	doc := md.Parser().Parse(text.NewReader(src))
	diffs, tables := 0, 0
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.CodeBlock:
			return ast.WalkStop, fmt.Errorf("an indented code block (something is indented by mistake): %q", blockText(n, src))
		case *ast.FencedCodeBlock:
			lang := string(n.Language(src))
			if lang != "diff" {
				return ast.WalkStop, fmt.Errorf("a fenced %q block: only diff blocks are expected", lang)
			}
			if n.Parent().Kind() != ast.KindDocument {
				return ast.WalkStop, fmt.Errorf("a diff block inside a %s, not at the top level", n.Parent().Kind())
			}
			lines := n.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				if seg.Start > 0 && src[seg.Start-1] != '\n' {
					return ast.WalkStop, fmt.Errorf("diff line %q does not start at column 0", seg.Value(src))
				}
			}
			if err := checkUnifiedDiff(blockText(n, src)); err != nil {
				return ast.WalkStop, err
			}
			diffs++
		case *east.Table:
			tables++
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hasChanges := bytes.Contains(src, []byte("| | action | attempts |"))
	if hasChanges && tables == 0 {
		t.Errorf("the counts table does not render as a table")
	}
	if want := len(regexp.MustCompile("\n```+diff\n").FindAllIndex(src, -1)); want != diffs {
		t.Errorf("%d diff fences in the source, %d diff blocks rendered", want, diffs)
	}
	var html bytes.Buffer
	if err := md.Renderer().Render(&html, src, doc); err != nil {
		t.Fatal(err)
	}
	if o, c := strings.Count(html.String(), "<details>"), strings.Count(html.String(), "</details>"); o != c {
		t.Errorf("%d <details> opened, %d closed", o, c)
	}
	// GitHub shows a list item's text as written: an action symbol must
	// be a code span, never the item's own marker ("- + x" is a nested
	// list).
	for _, line := range strings.Split(string(src), "\n") {
		if regexp.MustCompile(`^\s*[-*] [-+~!] `).MatchString(line) {
			t.Errorf("a list item starts with a bare action symbol: %q", line)
		}
	}
}

func blockText(n ast.Node, src []byte) string {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// checkUnifiedDiff checks that s is one file's unified diff: the ---/+++
// header, then hunks whose line counts match their headers. A line that
// starts with "-" or "+" anywhere else (an action line) is an error.
func checkUnifiedDiff(s string) error {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return fmt.Errorf("not a unified diff (no ---/+++ header):\n%s", s)
	}
	oldLeft, newLeft := 0, 0
	for i, l := range lines[2:] {
		switch {
		case oldLeft == 0 && newLeft == 0 && hunkHeader.MatchString(l):
			m := hunkHeader.FindStringSubmatch(l)
			oldLeft, newLeft = count(m[2]), count(m[4])
		case oldLeft == 0 && newLeft == 0 && strings.HasPrefix(l, "... diff truncated (") && i == len(lines)-3:
		case strings.HasPrefix(l, `\`): // "\ No newline at end of file"
		case strings.HasPrefix(l, " ") && oldLeft > 0 && newLeft > 0:
			oldLeft--
			newLeft--
		case strings.HasPrefix(l, "-") && oldLeft > 0:
			oldLeft--
		case strings.HasPrefix(l, "+") && newLeft > 0:
			newLeft--
		default:
			return fmt.Errorf("line %d of a diff block is not part of the diff: %q\n%s", i+3, l, s)
		}
	}
	if oldLeft != 0 || newLeft != 0 {
		return fmt.Errorf("a hunk is cut short (%d old, %d new lines missing):\n%s", oldLeft, newLeft, s)
	}
	return nil
}

func count(s string) int {
	if s == "" {
		return 1
	}
	n, _ := strconv.Atoi(s)
	return n
}

func TestCheckUnifiedDiffRefusesActionLines(t *testing.T) {
	good := "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
	if err := checkUnifiedDiff(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		good + "-/+ baseline/agent/hello#1\n",
		"-/+ baseline/agent/hello#1\n" + good,
		"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n",
	} {
		if checkUnifiedDiff(bad) == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}
