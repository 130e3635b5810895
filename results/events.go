package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// EventWindow is a window of an attempt's event log: lines From to
// From+len(Lines) of Total.
type EventWindow struct {
	Path  string      `json:"path"` // relative to the store
	Size  int64       `json:"size"`
	From  int         `json:"from"`
	Total int         `json:"total"`
	Lines []EventLine `json:"lines"`
}

// EventLine is one line of an event log: a protocol message the harness
// sent ({"t","seq","event"}), a line of hemra's own ({"t","hemra"}), or a
// relayed MCP message ({"t","mcp"}). Raw is the line as written; a line
// that is not JSON (cut by a crash) is kept as Unreadable text.
type EventLine struct {
	N          int             `json:"n"` // 0-based line number
	Raw        json.RawMessage `json:"raw,omitempty"`
	Unreadable string          `json:"unreadable,omitempty"`
}

// maxEventLine is the longest line the reader keeps whole; longer ones
// (a protocol line is at most 1 MiB, hemra's and MCP's are bounded too)
// are kept as unreadable text, cut.
const maxEventLine = 4 << 20

// readEvents reads the window opts asks for. A last line without its
// newline is being written: it is left out.
func readEvents(p string, opts DetailOptions) (EventWindow, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultEventLimit
	}
	w := EventWindow{Lines: []EventLine{}}
	f, err := os.Open(p)
	if err != nil {
		return w, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		w.Size = st.Size()
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var ring []EventLine // opts.Last: the last limit lines
	n := 0
	for {
		line, complete, err := readLine(r)
		if err != nil && !errors.Is(err, io.EOF) {
			return w, err
		}
		if !complete {
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		keep := opts.Last || n >= opts.From && n < opts.From+limit
		if keep {
			l := EventLine{N: n}
			if json.Valid(line) {
				l.Raw = append(json.RawMessage(nil), line...)
			} else {
				l.Unreadable = string(line)
			}
			if opts.Last {
				ring = append(ring, l)
				if len(ring) > limit {
					ring = ring[1:]
				}
			} else {
				w.Lines = append(w.Lines, l)
			}
		}
		n++
	}
	w.Total = n
	if opts.Last {
		w.Lines = append(w.Lines, ring...)
		if len(ring) > 0 {
			w.From = ring[0].N
		} else {
			w.From = n
		}
	} else {
		w.From = min(opts.From, n)
	}
	return w, nil
}

// readLine reads one line without its newline; complete is false at the
// end of the file when no newline ended it. A line over maxEventLine is
// cut there (its rest is read and dropped).
func readLine(r *bufio.Reader) (line []byte, complete bool, err error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxEventLine {
			buf = append(buf, chunk...)
		} else if len(buf) < maxEventLine {
			buf = append(buf, chunk[:maxEventLine-len(buf)]...)
		}
		switch {
		case err == nil:
			return bytes.TrimRight(buf, "\r\n"), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, false, err
		}
	}
}

// Step is one step of an attempt's trajectory, as a person reads it.
type Step struct {
	Line int       `json:"line"` // the event log line it starts at
	T    time.Time `json:"t"`
	// Source: harness (a protocol message), hemra (the executor's own
	// line), mcp (a relayed MCP message).
	Source string `json:"source"`
	// Kind: message, tool_call (with its result when the window has it),
	// tool_result (one whose call is not in the window), log, usage,
	// hello, result; for hemra: stage, exit, builtin, reuse, finish, ...;
	// for mcp: tool_call, connect, disconnect, refused, exit; unreadable.
	Kind string `json:"kind"`
	Seq  int    `json:"seq,omitempty"`
	// Role and Text: a message's role and content as text; for other
	// kinds, a log's message, a result's output or error, a note.
	Role  string `json:"role,omitempty"`
	Text  string `json:"text,omitempty"`
	Level string `json:"level,omitempty"`
	// A tool call: its name, id, input, and once answered its output.
	Tool     string          `json:"tool,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	Server   string          `json:"server,omitempty"` // MCP
	Method   string          `json:"method,omitempty"` // MCP
	Input    json.RawMessage `json:"input,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	IsError  bool            `json:"is_error,omitempty"`
	Answered bool            `json:"answered,omitempty"`
	// Duration of an MCP call, from its record.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Stage and Exit of hemra's lines; Status of a result.
	Stage  string `json:"stage,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
	Status string `json:"status,omitempty"`
	// Tail is the output tail hemra kept of a task command (solve.sh,
	// test.sh).
	Tail string `json:"tail,omitempty"`
}

type protocolLine struct {
	T     time.Time `json:"t"`
	Seq   int       `json:"seq"`
	Event *struct {
		Type   string          `json:"type"`
		Kind   string          `json:"kind"`
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
		Output json.RawMessage `json:"output"`
		Usage  json.RawMessage `json:"usage"`
	} `json:"event"`
	Hemra *struct {
		Type  string `json:"type"`
		Stage string `json:"stage"`
		Note  string `json:"note"`
		Exit  *int   `json:"exit"`
		Tail  string `json:"tail"`
	} `json:"hemra"`
	MCP *struct {
		Server     string          `json:"server"`
		Kind       string          `json:"kind"`
		Method     string          `json:"method"`
		ID         string          `json:"id"`
		Name       string          `json:"name"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
		IsError    bool            `json:"is_error"`
		Error      json.RawMessage `json:"error"`
		DurationNS int64           `json:"duration_ns"`
		Exit       *int            `json:"exit"`
		Note       string          `json:"note"`
	} `json:"mcp"`
}

type eventData struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output"`
	IsError bool            `json:"is_error"`
	Level   string          `json:"level"`
	Message string          `json:"message"`
}

// BuildTrajectory turns event log lines into steps, pairing each tool
// call with its result (by id; MCP calls by server and id) when both are
// in the lines.
func BuildTrajectory(lines []EventLine) []Step {
	steps := make([]Step, 0, len(lines))
	calls := map[string]int{}    // harness call id -> step index
	mcpCalls := map[string]int{} // server + "\x00" + id -> step index
	for _, l := range lines {
		if l.Unreadable != "" {
			steps = append(steps, Step{Line: l.N, Source: "hemra", Kind: "unreadable", Text: l.Unreadable})
			continue
		}
		var pl protocolLine
		if err := json.Unmarshal(l.Raw, &pl); err != nil {
			steps = append(steps, Step{Line: l.N, Source: "hemra", Kind: "unreadable", Text: string(l.Raw)})
			continue
		}
		switch {
		case pl.Hemra != nil:
			h := pl.Hemra
			steps = append(steps, Step{Line: l.N, T: pl.T, Source: "hemra", Kind: h.Type, Stage: h.Stage, Text: h.Note, Exit: h.Exit, Tail: h.Tail})
		case pl.MCP != nil:
			m := pl.MCP
			key := m.Server + "\x00" + m.ID
			if m.Kind == "tool_result" {
				if i, ok := mcpCalls[key]; ok && m.ID != "" {
					steps[i].Output, steps[i].IsError, steps[i].Answered = orError(m.Output, m.Error), m.IsError, true
					steps[i].Duration = time.Duration(m.DurationNS)
					delete(mcpCalls, key)
					continue
				}
			}
			s := Step{Line: l.N, T: pl.T, Source: "mcp", Kind: m.Kind, Server: m.Server, Method: m.Method, Tool: m.Name, CallID: m.ID,
				Input: m.Input, Output: orError(m.Output, m.Error), IsError: m.IsError, Text: m.Note, Exit: m.Exit, Duration: time.Duration(m.DurationNS)}
			if m.Kind == "tool_call" && m.ID != "" {
				mcpCalls[key] = len(steps)
			}
			steps = append(steps, s)
		case pl.Event != nil:
			e := pl.Event
			s := Step{Line: l.N, T: pl.T, Source: "harness", Seq: pl.Seq, Kind: e.Type}
			switch e.Type {
			case "event":
				s.Kind = e.Kind
				var d eventData
				_ = json.Unmarshal(e.Data, &d) // data is recorded as sent: any shape
				switch e.Kind {
				case "message":
					s.Role, s.Text = d.Role, contentText(d.Content)
					if s.Text == "" && d.Content == nil {
						s.Text = string(e.Data)
					}
				case "tool_call":
					s.Tool, s.CallID, s.Input = d.Name, d.ID, d.Input
					if d.ID != "" {
						calls[d.ID] = len(steps)
					}
				case "tool_result":
					if i, ok := calls[d.ID]; ok && d.ID != "" {
						steps[i].Output, steps[i].IsError, steps[i].Answered = d.Output, d.IsError, true
						delete(calls, d.ID)
						continue
					}
					s.CallID, s.Output, s.IsError = d.ID, d.Output, d.IsError
				case "log":
					s.Level, s.Text = d.Level, d.Message
					if d.Message == "" {
						s.Text = string(e.Data)
					}
				default: // usage, and any kind a later protocol adds
					s.Output = e.Data
				}
			case "result":
				s.Status, s.Output, s.Text = e.Status, e.Output, e.Error
				if len(e.Usage) > 0 && s.Output == nil {
					s.Output = e.Usage
				}
			case "hello":
				var h struct {
					Protocol string `json:"protocol"`
					Harness  struct {
						Name    string `json:"name"`
						Version string `json:"version"`
					} `json:"harness"`
				}
				_ = json.Unmarshal(l.Raw, &struct {
					Event any `json:"event"`
				}{&h})
				s.Text = strings.TrimSpace(h.Harness.Name + " " + h.Harness.Version + " · " + h.Protocol)
			}
			steps = append(steps, s)
		default:
			steps = append(steps, Step{Line: l.N, T: pl.T, Source: "hemra", Kind: "unknown", Text: string(l.Raw)})
		}
	}
	return steps
}

func orError(out, errObj json.RawMessage) json.RawMessage {
	if len(out) == 0 {
		return errObj
	}
	return out
}

// contentText is a message's content as text: a string as is, a list of
// content parts (OpenAI's and Anthropic's {"type":"text","text":...}) as
// their texts joined, anything else as its JSON.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Text == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return string(raw)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
