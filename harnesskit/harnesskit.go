package harnesskit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/hemra-dev/hemra/protocol/wire"
)

// Func is a harness: it does one attempt and returns its result. ctx is
// cancelled when hemra sends run.cancel (or the harness gets SIGTERM);
// context.Cause(ctx) says why. Returning an error reports status "error".
type Func func(ctx context.Context, run *Run) (*Result, error)

// Usage is model usage and cost.
type Usage = wire.Usage

// Info names the harness in its hello.
type Info struct {
	Name    string
	Version string
}

// Result is what the harness reports at the end.
type Result struct {
	// Output is the final answer (any JSON value); JSONL tasks compare it
	// with their target.
	Output any
	// Usage is the attempt's total model usage and cost.
	Usage *Usage
}

// ErrCancelled is the cause of ctx when hemra sent run.cancel; the error
// it wraps carries hemra's reason.
var ErrCancelled = errors.New("cancelled by hemra")

// Main runs fn as a harness on stdin and stdout, named after the binary,
// and exits. Anything the program prints to os.Stdout goes to stderr
// instead: stdout belongs to the protocol.
func Main(fn Func) {
	MainWith(Info{Name: filepath.Base(os.Args[0]), Version: buildVersion()}, fn)
}

// MainWith is Main with an explicit name and version.
func MainWith(info Info, fn Func) {
	out := os.Stdout
	os.Stdout = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Serve(ctx, os.Stdin, out, info, fn); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", info.Name, err)
		stop()
		os.Exit(1)
	}
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// Serve speaks the protocol on in and out: it sends the hello, reads
// run.start, runs fn, and writes the result. It returns an error only when
// the protocol itself fails (no run.start, a broken stdout); fn's error
// is reported to hemra as a result with status "error".
func Serve(ctx context.Context, in io.Reader, out io.Writer, info Info, fn Func) error {
	w := &writer{w: out}
	if err := w.send(wire.Hello{Type: wire.TypeHello, Protocol: wire.Version, Harness: wire.Harness{Name: info.Name, Version: info.Version}}); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	r := bufio.NewReaderSize(in, 64<<10)
	line, err := r.ReadBytes('\n')
	if len(line) == 0 && err != nil {
		return fmt.Errorf("waiting for run.start: %w", err)
	}
	var start wire.Start
	if err := json.Unmarshal(line, &start); err != nil {
		return fmt.Errorf("reading run.start: %w", err)
	}
	if start.Type != wire.TypeRunStart {
		return fmt.Errorf("expected run.start, got %q", start.Type)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go watch(r, cancel)

	run := &Run{Start: start, w: w}
	res, err := call(ctx, run, fn)
	result := wire.Result{Type: wire.TypeResult, Status: wire.StatusOK}
	if err != nil {
		result.Status = wire.StatusError
		result.Error = err.Error()
	}
	if res != nil {
		if res.Output != nil {
			b, merr := json.Marshal(res.Output)
			if merr != nil {
				result.Status = wire.StatusError
				result.Error = "encoding the output: " + merr.Error()
			} else {
				result.Output = b
			}
		}
		if res.Usage != nil {
			result.Usage, _ = json.Marshal(res.Usage)
		}
	}
	if err := w.send(result); err != nil {
		return fmt.Errorf("sending the result: %w", err)
	}
	return nil
}

// call runs fn, turning a panic into an error result.
func call(ctx context.Context, run *Run, fn Func) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("harness panicked: %v", p)
		}
	}()
	return fn(ctx, run)
}

// watch reads hemra's later messages: run.cancel cancels ctx. The end of
// stdin is not a cancel: hemra closes it once it has the result.
func watch(r *bufio.Reader, cancel context.CancelCauseFunc) {
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var c wire.Cancel
			if json.Unmarshal(line, &c) == nil && c.Type == wire.TypeRunCancel {
				cancel(fmt.Errorf("%w: %s", ErrCancelled, c.Reason))
			}
		}
		if err != nil {
			return
		}
	}
}

// Run is one attempt, as run.start described it, and the way to report
// what happens. Its methods are safe for concurrent use.
type Run struct {
	Start wire.Start
	w     *writer
}

// Instruction is the task's instruction (Harbor tasks).
func (r *Run) Instruction() string { return r.Start.Task.Instruction }

// Input is the task's input (JSONL tasks), as JSON.
func (r *Run) Input() json.RawMessage { return r.Start.Task.Input }

// Args decodes the harness block's args into v.
func (r *Run) Args(v any) error {
	if len(r.Start.Args) == 0 {
		return nil
	}
	return json.Unmarshal(r.Start.Args, v)
}

// Workdir is the folder the agent works in.
func (r *Run) Workdir() string { return r.Start.Paths.Workdir }

// MCPServer returns the attempt's MCP server with this name: its
// Command is what an MCP client runs as the server over stdio.
func (r *Run) MCPServer(name string) (wire.MCPServer, bool) {
	for _, m := range r.Start.MCP {
		if m.Name == name {
			return m, true
		}
	}
	return wire.MCPServer{}, false
}

// ArtifactsDir is where files to keep go: hemra stores each regular file
// found there after the attempt.
func (r *Run) ArtifactsDir() string { return r.Start.Paths.Artifacts }

// AgentLogsDir is where the harness may write its own logs.
func (r *Run) AgentLogsDir() string { return r.Start.Paths.AgentLogs }

// Event sends an event of any kind with data encoded as JSON.
func (r *Run) Event(kind string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return r.w.send(wire.Event{Type: wire.TypeEvent, Kind: kind, Data: b})
}

// Message records a message of the conversation (role: assistant, user or
// system).
func (r *Run) Message(role, content string) error {
	return r.Event(wire.KindMessage, wire.MessageData{Role: role, Content: content})
}

// ToolCall records a tool call; id pairs it with its ToolResult.
func (r *Run) ToolCall(id, name string, input any) error {
	return r.Event(wire.KindToolCall, wire.ToolCallData{ID: id, Name: name, Input: input})
}

// ToolResult records a tool's result.
func (r *Run) ToolResult(id string, output any, isError bool) error {
	return r.Event(wire.KindToolResult, wire.ToolResultData{ID: id, Output: output, IsError: isError})
}

// Log records a log line (level: debug, info, warn or error).
func (r *Run) Log(level, message string) error {
	return r.Event(wire.KindLog, wire.LogData{Level: level, Message: message})
}

// Logf is Log at level info with formatting.
func (r *Run) Logf(format string, args ...any) error {
	return r.Log("info", fmt.Sprintf(format, args...))
}

// Usage records model usage and cost (one call, or a running total).
func (r *Run) Usage(u Usage) error {
	return r.Event(wire.KindUsage, u)
}

// writer sends one message per line, one line per Write.
type writer struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *writer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(b)
	return err
}
