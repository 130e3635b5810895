package dataset

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// FuzzParseTaskConfig feeds arbitrary bytes to the task.toml reader: it must
// never panic, and every diagnostic must point inside the file.
func FuzzParseTaskConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*", "*", "task.toml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "invalid", "*", "*", "task.toml"))
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("[[steps]]\n[[steps.x]]\n[steps.x.y]\nname = 1\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, diags := ParseTaskConfig("task.toml", src)
		checkRanges(t, src, diags)
	})
}

// FuzzJSONLLine does the same for one JSONL line.
func FuzzJSONLLine(f *testing.F) {
	for _, s := range []string{`{"id": "a", "input": 1}`, `{"id": 1}`, `[1]`, `{"id": "a", "input": 1} x`, "\xef\xbb\xbf{}", `{"id":"#"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var diags hcl.Diagnostics
		d := func(line, lineStart, col int, summary, detail string) *hcl.Diagnostic {
			diag := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Subject: &hcl.Range{Start: hcl.Pos{Line: line, Column: col, Byte: lineStart + col - 1}}}
			diags = append(diags, diag)
			return diag
		}
		p := &jsonlParser{diag: d, seen: map[string]int{}, unknown: map[string]*unknownField{}}
		task, _ := p.parseLine(line, 1, 0)
		for _, diag := range diags {
			if b := diag.Subject.Start.Byte; b < 0 || b > len(line) {
				t.Fatalf("%s: byte %d outside a line of %d bytes", diag.Summary, b, len(line))
			}
		}
		if task != nil && task.Name == "" {
			t.Fatal("task without a name")
		}
	})
}

func checkRanges(t *testing.T, src []byte, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		if d.Subject == nil {
			t.Fatalf("%s: no subject", d.Summary)
		}
		r := d.Subject
		if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte || r.Start.Line < 1 {
			t.Fatalf("%s (%s): range %+v outside a file of %d bytes", d.Summary, d.Detail, r, len(src))
		}
	}
}
