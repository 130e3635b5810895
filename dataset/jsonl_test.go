package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func TestLoadJSONLValid(t *testing.T) {
	tasks, diags := LoadJSONL(filepath.Join("testdata", "jsonl", "valid.jsonl"))
	if diags.HasErrors() {
		t.Fatalf("unexpected errors: %v", diagLines(diags))
	}
	type want struct{ name, input, target, metadata string }
	wants := []want{
		{"add-1", `{"question":"What is 2+2?"}`, `"4"`, `{"split":"test"}`},
		{"add-2", `"What is 3+3?"`, `6`, ``},
		{"add-3", `[1,2,3]`, ``, ``}, // white space compacted
		{"crlf-1", `"windows line"`, ``, ``},
		{"last", `null`, ``, ``}, // no trailing newline; null is a value
	}
	if len(tasks) != len(wants) {
		t.Fatalf("%d tasks, want %d", len(tasks), len(wants))
	}
	lines := []int{1, 2, 5, 6, 7} // blank lines skipped but counted
	for i, w := range wants {
		got := tasks[i]
		if got.Name != w.name || string(got.Input) != w.input || string(got.Target) != w.target || string(got.Metadata) != w.metadata || got.Kind != "jsonl" || got.Line != lines[i] {
			t.Errorf("task %d = {%s %s %s %s line %d}, want %v line %d", i, got.Name, got.Input, got.Target, got.Metadata, got.Line, w, lines[i])
		}
	}
	// The unknown "extra" field is a warning, not an error.
	if got := diagLines(diags); len(got) != 1 || got[0] != "warning: testdata/jsonl/valid.jsonl:7,31: Unknown JSONL field" {
		t.Errorf("diagnostics = %v", got)
	}
}

func TestLoadJSONLBadLines(t *testing.T) {
	path := filepath.Join("testdata", "jsonl", "mixed.jsonl")
	files := map[string]*hcl.File{}
	tasks, diags := Load(path, "", LoadOptions{Files: files})
	want, err := os.ReadFile(filepath.Join("testdata", "jsonl", "mixed.errors"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(diagLines(diags), "\n"); got != strings.TrimSpace(string(want)) {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
	// Good lines still load, in file order, so one bad line does not hide
	// the others' problems.
	var names []string
	for _, t := range tasks {
		names = append(names, t.Name)
	}
	if strings.Join(names, ",") != "ok-1,ok-2,ok-3" {
		t.Errorf("tasks = %v", names)
	}
	// Byte offsets agree with line and column, for snippets.
	src := files[path]
	if src == nil {
		t.Fatal("no snippet source recorded")
	}
	for _, d := range diags {
		lineStart := d.Subject.Start.Byte - (d.Subject.Start.Column - 1)
		line := bytes.Count(src.Bytes[:lineStart], []byte("\n")) + 1
		if line != d.Subject.Start.Line {
			t.Errorf("%s: byte %d is on line %d, diagnostic says %d", d.Summary, d.Subject.Start.Byte, line, d.Subject.Start.Line)
		}
	}
	if got := string(src.Bytes[diags[4].Subject.Start.Byte:diags[4].Subject.End.Byte]); got != `"` {
		t.Errorf("duplicate id subject starts at %q, want the id key", got)
	}
}

func TestLoadJSONLLongLines(t *testing.T) {
	if testing.Short() {
		t.Skip("writes an 80 MiB file")
	}
	path := filepath.Join(t.TempDir(), "long.jsonl")
	var b bytes.Buffer
	big := strings.Repeat("x", 17<<20) // over 16 MiB: must load
	b.WriteString(`{"id": "big", "input": "` + big + `"}` + "\n")
	huge := strings.Repeat("y", MaxJSONLLine) // over the limit: refused, file read on
	b.WriteString(`{"id": "huge", "input": "` + huge + `"}` + "\n")
	b.WriteString(`{"id": "after", "input": 1}` + "\n")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, diags := LoadJSONL(path)
	if got := diagLines(diags); len(got) != 1 || !strings.HasSuffix(got[0], ":2,1: JSONL line too long") {
		t.Errorf("diagnostics = %v", got)
	}
	if len(tasks) != 2 || tasks[0].Name != "big" || len(tasks[0].Input) != len(big)+2 || tasks[1].Name != "after" || tasks[1].Line != 3 {
		t.Errorf("tasks = %d, first %q", len(tasks), tasks[0].Name)
	}
}

func TestLoadJSONLMissingFile(t *testing.T) {
	_, diags := LoadJSONL(filepath.Join(t.TempDir(), "none.jsonl"))
	if len(diags) != 1 || diags[0].Summary != "Cannot read dataset file" {
		t.Errorf("diagnostics = %v", diagLines(diags))
	}
}

func TestByteOrderMarkAccepted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bom.jsonl")
	must(t, os.WriteFile(path, []byte("\xef\xbb\xbf{\"id\": \"a\", \"input\": 1}\n{\"id\": \"b\", \"input\": 2}\n"), 0o644))
	tasks, diags := LoadJSONL(path)
	if diags.HasErrors() || len(tasks) != 2 {
		t.Errorf("BOM JSONL: %d tasks, %v", len(tasks), diagLines(diags))
	}
	cfg, diags := ParseTaskConfig("task.toml", []byte("\xef\xbb\xbfversion = \"1.0\"\n[agent]\ntimeout_sec = \"x\"\n"))
	if cfg == nil || cfg.SchemaVersion != "1.0" {
		t.Errorf("BOM task.toml not read: %+v", cfg)
	}
	if got := diagLines(diags); len(got) != 1 || got[0] != "task.toml:3,15: Invalid task.toml" {
		t.Errorf("positions moved by the BOM: %v", got)
	}
}
