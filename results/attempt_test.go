package results

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLog(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadEventsWindows(t *testing.T) {
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `{"t":"2026-01-01T00:00:00Z","seq":%d,"event":{"type":"event","kind":"log","data":{"message":"m%d"}}}`+"\n", i+1, i)
	}
	b.WriteString("\n")                                  // blank lines are not lines
	b.WriteString(`{"t":"2026-01-01T00:00:00Z","seq":9`) // being written: no newline yet
	p := writeLog(t, b.String())
	for _, c := range []struct {
		opts        DetailOptions
		from, lines int
	}{
		{DetailOptions{}, 0, 10},
		{DetailOptions{From: 3, Limit: 4}, 3, 4},
		{DetailOptions{From: 8, Limit: 4}, 8, 2},
		{DetailOptions{From: 20}, 10, 0},
		{DetailOptions{Last: true, Limit: 3}, 7, 3},
	} {
		w, err := readEvents(p, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if w.Total != 10 || w.From != c.from || len(w.Lines) != c.lines {
			t.Errorf("%+v: total %d from %d lines %d, want 10 %d %d", c.opts, w.Total, w.From, len(w.Lines), c.from, c.lines)
		}
		for i, l := range w.Lines {
			if l.N != c.from+i || l.Unreadable != "" {
				t.Errorf("%+v: line %d is %+v", c.opts, i, l)
			}
		}
	}
}

func TestReadEventsCutsALongLine(t *testing.T) {
	long := `{"t":"x","junk":"` + strings.Repeat("a", maxEventLine+10) + `"}` + "\n" + `{"t":"2026-01-01T00:00:00Z","seq":2}` + "\n"
	w, err := readEvents(writeLog(t, long), DetailOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Total != 2 || len(w.Lines[0].Unreadable) != maxEventLine || w.Lines[1].Raw == nil {
		t.Fatalf("total %d, first line %d bytes unreadable, second %s", w.Total, len(w.Lines[0].Unreadable), w.Lines[1].Raw)
	}
}

func TestTrajectoryPairsCallsAndKeepsOrphans(t *testing.T) {
	lines := []string{
		`{"t":"2026-01-01T00:00:00Z","seq":2,"event":{"type":"event","kind":"tool_result","data":{"id":"early","output":"its call is before the window"}}}`,
		`{"t":"2026-01-01T00:00:01Z","seq":3,"event":{"type":"event","kind":"tool_call","data":{"id":"a","name":"grep","input":{"q":"x"}}}}`,
		`{"t":"2026-01-01T00:00:01Z","seq":4,"event":{"type":"event","kind":"message","data":{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}}}`,
		`{"t":"2026-01-01T00:00:02Z","seq":5,"event":{"type":"event","kind":"tool_result","data":{"id":"a","output":"found","is_error":true}}}`,
		`{"t":"2026-01-01T00:00:02Z","mcp":{"server":"fs","kind":"tool_call","id":"1","name":"read"}}`,
		`{"t":"2026-01-01T00:00:02Z","mcp":{"server":"db","kind":"tool_result","id":"1","output":{"rows":0}}}`,
		`{"t":"2026-01-01T00:00:03Z","mcp":{"server":"fs","kind":"tool_result","id":"1","error":{"code":-32000},"is_error":true,"duration_ns":5000000}}`,
		`{"t":"2026-01-01T00:00:04Z","seq":6,"event":{"type":"event","kind":"usage","data":{"input_tokens":5}}}`,
	}
	var ls []EventLine
	for i, l := range lines {
		ls = append(ls, EventLine{N: i, Raw: []byte(l)})
	}
	steps := BuildTrajectory(ls)
	var got []string
	for _, s := range steps {
		got = append(got, fmt.Sprintf("%s:%s:%s:%v", s.Source, s.Kind, s.CallID, s.Answered))
	}
	want := "harness:tool_result:early:false harness:tool_call:a:true harness:message::false mcp:tool_call:1:true mcp:tool_result:1:false harness:usage::false"
	if strings.Join(got, " ") != want {
		t.Fatalf("steps\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if steps[1].Tool != "grep" || string(steps[1].Output) != `"found"` || !steps[1].IsError {
		t.Errorf("the paired call: %+v", steps[1])
	}
	if steps[2].Text != "one\ntwo" {
		t.Errorf("content parts as text: %q", steps[2].Text)
	}
	if s := steps[3]; s.Server != "fs" || !s.IsError || s.Duration.Milliseconds() != 5 || string(s.Output) != `{"code":-32000}` {
		t.Errorf("the MCP call answered by fs (not by db, whose id is the same): %+v", s)
	}
}
