package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hemra-dev/hemra/protocol/wire"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/state"
)

// Version is the protocol version hemra speaks.
const Version = wire.Version

// The wire messages, under the names the executor uses.
type (
	Hello        = wire.Hello
	StartMessage = wire.Start
	Event        = wire.Event
	Result       = wire.Result
	Cancel       = wire.Cancel
	Usage        = wire.Usage
)

// Default limits (SPEC §7). Options override each one.
const (
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultDeadline         = 15 * time.Minute
	DefaultCancelGrace      = 10 * time.Second
	DefaultMaxLineBytes     = 1 << 20
	DefaultMaxEventBytes    = 64 << 20
	DefaultStderrTailBytes  = 64 << 10
)

// exitDrain bounds how long Run waits for the harness's stdout to reach
// its end once the process has exited. Providers close the stream when the
// process group is gone; this only guards against one that does not.
const exitDrain = time.Minute

// Options are one session's limits and sinks. Zero values take the
// defaults.
type Options struct {
	HandshakeTimeout time.Duration // until the hello
	Deadline         time.Duration // from Run's start until cancellation begins
	// CancelGrace is the wait between each step of the stop escalation:
	// run.cancel, then SIGTERM to the group, then SIGKILL to the group.
	CancelGrace   time.Duration
	MaxLineBytes  int   // one line from the harness
	MaxEventBytes int64 // everything the harness sends after its hello
	// StderrTailBytes is how much of the end of stderr is kept.
	StderrTailBytes int

	// EventLog receives every harness message (hello, events, result) as
	// one JSON line {"t":...,"seq":n,"event":<the line as received>}.
	EventLog io.Writer
	// Trace, when set, receives every line in both directions ("→" to the
	// harness, "←" from it) and stderr, for `hemra harness check`.
	Trace io.Writer
}

func (o Options) withDefaults() Options {
	orDefault(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	orDefault(&o.Deadline, DefaultDeadline)
	orDefault(&o.CancelGrace, DefaultCancelGrace)
	orDefault(&o.MaxLineBytes, DefaultMaxLineBytes)
	orDefault(&o.MaxEventBytes, DefaultMaxEventBytes)
	orDefault(&o.StderrTailBytes, DefaultStderrTailBytes)
	return o
}

// orDefault gives a limit left at zero (or set below it) its default.
func orDefault[T ~int | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// LogRecord is one line of an attempt's event log.
type LogRecord struct {
	T     time.Time       `json:"t"`
	Seq   int             `json:"seq"`
	Event json.RawMessage `json:"event"`
}

// Stop escalation steps, in order.
const (
	StoppedCancel    = "cancel"    // run.cancel sent
	StoppedTerminate = "terminate" // SIGTERM sent to the process group
	StoppedKill      = "kill"      // SIGKILL sent to the process group
)

// Outcome is how one session ended. Class is empty when the harness
// followed the protocol to the end: it said hello, sent one result and
// exited. Otherwise Class is agent_timeout, interrupted, protocol_error or
// infra_error, and Error says what happened in one line.
//
// A result with status "error" is the harness reporting its own failure;
// the session itself is still complete (Class empty).
type Outcome struct {
	Class state.Class
	Error string

	Hello  *Hello
	Result *Result // nil when no result arrived

	Exited   bool // the process was seen to end
	ExitCode int  // 128+signal when killed by a signal

	Events     int   // event messages received
	Lines      int   // lines written to the event log
	EventBytes int64 // bytes received after the hello
	StderrTail string
	// Stopped is how far the stop escalation went ("" when the harness
	// ended on its own): cancel, terminate or kill.
	Stopped string

	StartedAt  time.Time
	FinishedAt time.Time
}

// OK reports whether the session completed and the harness reported
// success.
func (o *Outcome) OK() bool {
	return o.Class == "" && o.Result != nil && o.Result.Status == wire.StatusOK
}

// Record copies the agent's part of the outcome into a state record:
// exit code, result output, usage, event count and stderr tail. The class
// and error are the executor's to decide.
func (o *Outcome) Record(dst *state.Outcome) {
	dst.AgentExit = o.ExitCode
	if o.Result != nil {
		dst.AgentResult = o.Result.Output
		dst.Usage = o.Result.Usage
	}
	dst.EventCount = o.Events
	dst.StderrTail = o.StderrTail
}

// Exec starts a harness in an instance and runs the session with it. The
// process is started with a context that outlives ctx, so that cancelling
// ctx goes through the graceful stop escalation instead of an immediate
// kill. A failure to start is an infrastructure error.
func Exec(ctx context.Context, inst sandbox.Instance, req sandbox.ExecRequest, start *StartMessage, opts Options) *Outcome {
	opts = opts.withDefaults()
	req.Stdin = true
	if req.Timeout == 0 {
		// A backstop only: the session's own deadline and escalation end
		// the harness first.
		req.Timeout = opts.HandshakeTimeout + opts.Deadline + 3*opts.CancelGrace + time.Minute
	}
	started := time.Now()
	proc, err := inst.Exec(context.WithoutCancel(ctx), req)
	if err != nil {
		now := time.Now()
		return &Outcome{Class: state.ClassInfraError, Error: "starting the harness: " + err.Error(), StartedAt: started, FinishedAt: now}
	}
	return Run(ctx, proc, start, opts)
}

// Run drives one protocol session with a started harness process: it
// waits for the hello, sends run.start, records events, takes the result,
// and enforces every limit. Cancelling ctx (or reaching the deadline)
// sends run.cancel, then SIGTERM, then SIGKILL to the process group, one
// grace period apart. Run always waits for the process and returns; a
// misbehaving harness only ever fails its own session.
func Run(ctx context.Context, proc sandbox.Process, start *StartMessage, opts Options) *Outcome {
	opts = opts.withDefaults()
	s := &session{
		ctx:   ctx,
		proc:  proc,
		start: *start,
		opts:  opts,
		out:   &Outcome{StartedAt: time.Now()},
		tail:  &tailBuffer{max: opts.StderrTailBytes},
	}
	if opts.Trace != nil {
		s.trace = &tracer{w: opts.Trace}
	}
	s.run()
	s.out.FinishedAt = time.Now()
	return s.out
}

type session struct {
	ctx   context.Context
	proc  sandbox.Process
	start StartMessage
	opts  Options
	out   *Outcome
	trace *tracer

	tailMu sync.Mutex
	tail   *tailBuffer

	seq int

	failed bool // a protocol or infrastructure error ended the session early
	stage  int  // 0, then 1 cancel, 2 terminate, 3 kill

	escalate   *time.Timer
	sendCancel func(reason string) // set by run once the writer is up
}

// helloSeen and resultSeen say how far the harness got: its hello and
// result are kept in the outcome as they arrive.
func (s *session) helloSeen() bool  { return s.out.Hello != nil }
func (s *session) resultSeen() bool { return s.out.Result != nil }

type lineItem struct {
	line []byte
	err  error
}

type exitItem struct {
	code int
	err  error
}

func (s *session) run() {
	stdin := s.proc.Stdin()
	stdout := s.proc.Stdout()
	if stdin == nil || stdout == nil {
		s.fail(state.ClassInfraError, "the harness process has no stdin or stdout to speak the protocol on")
		_ = s.proc.Kill()
		s.waitQuietly()
		return
	}

	done := make(chan struct{})
	defer close(done)

	// stdout: lines to the main loop.
	lines := make(chan lineItem)
	lr := newLineReader(stdout, s.opts.MaxLineBytes)
	go func() {
		defer close(lines)
		for {
			line, err := lr.next()
			if err == io.EOF {
				return
			}
			select {
			case lines <- lineItem{line, err}:
			case <-done:
				lr.discard()
				return
			}
			if err != nil {
				lr.discard()
				return
			}
		}
	}()

	// stderr: a bounded tail, and the trace.
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		s.drainStderr(s.proc.Stderr())
	}()

	// stdin: hemra's messages, written off the main loop so a harness that
	// never reads cannot block it.
	sends := make(chan []byte, 4)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		broken := false
		for b := range sends {
			if broken {
				continue
			}
			if _, err := stdin.Write(b); err != nil {
				broken = true
			}
		}
	}()
	var stdinClosed bool
	closeStdin := func() {
		if !stdinClosed {
			stdinClosed = true
			_ = stdin.Close()
		}
	}

	exits := make(chan exitItem, 1)
	go func() {
		code, err := s.proc.Wait()
		exits <- exitItem{code, err}
	}()

	handshake := time.NewTimer(s.opts.HandshakeTimeout)
	defer handshake.Stop()
	deadlineAt := s.out.StartedAt.Add(s.opts.Deadline)
	deadline := time.NewTimer(s.opts.Deadline)
	defer deadline.Stop()
	s.escalate = time.NewTimer(time.Hour)
	s.escalate.Stop()
	defer s.escalate.Stop()
	var (
		afterResult *time.Timer // bounds the wait for exit after the result
		afterEOF    *time.Timer // bounds the wait for exit after stdout ended
		drain       *time.Timer // bounds the wait for stdout after exit
	)
	defer func() {
		for _, t := range []*time.Timer{afterResult, afterEOF, drain} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	timerC := func(t *time.Timer) <-chan time.Time {
		if t == nil {
			return nil
		}
		return t.C
	}

	send := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			s.fail(state.ClassInfraError, "encoding a message for the harness: "+err.Error())
			return
		}
		s.trace.line("→ ", b)
		sends <- append(b, '\n')
	}
	s.sendCancel = func(reason string) { send(Cancel{Type: wire.TypeRunCancel, Reason: reason}) }

	ctxDone := s.ctx.Done()
	stdoutEOF, exited := false, false
	var exit exitItem

loop:
	for !(stdoutEOF && exited) {
		select {
		case it, ok := <-lines:
			if !ok {
				stdoutEOF = true
				lines = nil
				if !s.resultSeen() && !s.failed && !exited {
					afterEOF = time.NewTimer(min(s.opts.CancelGrace, time.Second))
				}
				continue
			}
			if s.failed {
				continue // draining after an error
			}
			if it.err != nil {
				var tooLong *lineTooLongError
				if errors.As(it.err, &tooLong) {
					s.protocolError(fmt.Sprintf("the harness sent a %s (line %d)", tooLong.Error(), s.out.Lines+1))
				} else {
					s.fail(state.ClassInfraError, "reading the harness's stdout: "+it.err.Error())
					s.stopNow()
				}
				continue
			}
			s.handleLine(it.line, deadlineAt, send, closeStdin, handshake, deadline)
			if s.resultSeen() && afterResult == nil {
				afterResult = time.NewTimer(s.opts.CancelGrace)
			}

		case exit = <-exits:
			exited = true
			s.out.Exited = true
			s.out.ExitCode = exit.code
			closeStdin()
			if !stdoutEOF {
				drain = time.NewTimer(exitDrain)
			}

		case <-handshake.C:
			if !s.helloSeen() && !s.failed && !exited {
				s.protocolError(fmt.Sprintf("the harness sent no hello within %s", s.opts.HandshakeTimeout))
			}

		case <-deadline.C:
			if !s.resultSeen() && !s.failed && !exited {
				s.fail(state.ClassAgentTimeout, fmt.Sprintf("the harness did not finish within its %s deadline", s.opts.Deadline))
				s.stopGracefully("deadline reached")
			}

		case <-ctxDone:
			ctxDone = nil
			if !s.resultSeen() && !s.failed && !exited {
				s.fail(state.ClassInterrupted, "interrupted: "+causeText(s.ctx))
				s.stopGracefully("interrupted by the operator")
			}

		case <-timerC(afterResult):
			if !exited {
				s.stopNow()
			}

		case <-timerC(afterEOF):
			if !exited && !s.failed && !s.resultSeen() {
				s.protocolError("the harness closed its stdout without sending a result")
			}

		case <-s.escalate.C:
			switch s.stage {
			case 1:
				s.stopNow()
			case 2:
				s.stage = 3
				s.out.Stopped = StoppedKill
				_ = s.proc.Kill()
				s.escalate.Reset(s.opts.CancelGrace)
			default:
				if !exited {
					s.note("the harness did not exit after SIGKILL")
					break loop
				}
			}

		case <-timerC(drain):
			// The process is gone but its stdout never ended: a provider
			// that cannot close it. Stop waiting.
			if c, ok := stdout.(io.Closer); ok {
				_ = c.Close()
			}
			break loop
		}
	}

	closeStdin()
	close(sends)
	<-writerDone

	if exited {
		// Providers end stderr with the process group; wait for the tail.
		select {
		case <-stderrDone:
		case <-time.After(exitDrain):
		}
	}

	if !s.resultSeen() && s.out.Class == "" {
		switch {
		case exit.err != nil:
			s.fail(state.ClassInfraError, "waiting for the harness: "+exit.err.Error())
		case !s.helloSeen():
			s.fail(state.ClassProtocolError, fmt.Sprintf("the harness exited with code %d before sending its hello%s", exit.code, s.stderrHint()))
		default:
			s.fail(state.ClassProtocolError, fmt.Sprintf("the harness exited with code %d without sending a result%s", exit.code, s.stderrHint()))
		}
	}
	s.tailMu.Lock()
	s.out.StderrTail = s.tail.String()
	s.tailMu.Unlock()
}

// stopGracefully starts the escalation with run.cancel. A harness that
// never said hello is not listening: it gets SIGTERM at once.
func (s *session) stopGracefully(reason string) {
	if s.stage >= 1 {
		return
	}
	if !s.helloSeen() {
		s.stopNow()
		return
	}
	s.stage = 1
	s.out.Stopped = StoppedCancel
	if s.helloSeen() && s.sendCancel != nil {
		s.sendCancel(reason)
	}
	s.escalate.Reset(s.opts.CancelGrace)
}

// stopNow skips run.cancel: SIGTERM to the group, SIGKILL one grace later.
func (s *session) stopNow() {
	if s.stage >= 2 {
		return
	}
	s.stage = 2
	s.out.Stopped = StoppedTerminate
	_ = s.proc.Terminate()
	s.escalate.Reset(s.opts.CancelGrace)
}

func (s *session) handleLine(line []byte, deadlineAt time.Time, send func(any), closeStdin func(), handshake, deadline *time.Timer) {
	s.trace.line("← ", line)
	n := s.out.Lines + 1
	if s.helloSeen() {
		s.out.EventBytes += int64(len(line))
		if s.out.EventBytes > s.opts.MaxEventBytes {
			s.protocolError(fmt.Sprintf("the harness sent more than %s of events (line %d)", formatBytes(s.opts.MaxEventBytes), n))
			return
		}
	}
	if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] != '{' && json.Valid(line) {
		s.protocolError(fmt.Sprintf("line %d from the harness is not a JSON object: %s", n, clip(line, 80)))
		return
	}
	var env wire.Envelope
	if err := json.Unmarshal(line, &env); err != nil {
		s.protocolError(fmt.Sprintf("line %d from the harness is not valid JSON (%s): %s", n, jsonProblem(err), clip(line, 80)))
		return
	}
	if s.resultSeen() {
		s.protocolError(fmt.Sprintf("the harness sent a %q message after its result (line %d)", env.Type, n))
		return
	}
	if !s.helloSeen() {
		if env.Type != wire.TypeHello {
			s.protocolError(fmt.Sprintf("the harness's first line must be a hello, got %s", describeType(env.Type)))
			return
		}
		var h Hello
		if err := json.Unmarshal(line, &h); err != nil {
			s.protocolError(fmt.Sprintf("the harness's hello is malformed (%s)", jsonProblem(err)))
			return
		}
		if h.Protocol != Version {
			s.protocolError(fmt.Sprintf("the harness speaks protocol %q; hemra speaks %q", h.Protocol, Version))
			return
		}
		if !s.log(line) {
			return
		}
		s.out.Hello = &h
		handshake.Stop()
		start := s.start
		start.Type = wire.TypeRunStart
		start.Protocol = Version
		if start.Run.Deadline == "" {
			start.Run.Deadline = deadlineAt.UTC().Format(time.RFC3339)
		}
		send(start)
		return
	}
	switch env.Type {
	case wire.TypeEvent:
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			s.protocolError(fmt.Sprintf("event on line %d is malformed (%s)", n, jsonProblem(err)))
			return
		}
		if !slices.Contains(wire.EventKinds, ev.Kind) {
			s.protocolError(fmt.Sprintf("event on line %d has kind %q; the kinds are %s", n, ev.Kind, quoteList(wire.EventKinds)))
			return
		}
		if s.log(line) {
			s.out.Events++
		}
	case wire.TypeResult:
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			s.protocolError(fmt.Sprintf("the result on line %d is malformed (%s)", n, jsonProblem(err)))
			return
		}
		if r.Status != wire.StatusOK && r.Status != wire.StatusError {
			s.protocolError(fmt.Sprintf("the result on line %d has status %q; it must be \"ok\" or \"error\"", n, r.Status))
			return
		}
		if !s.log(line) {
			return
		}
		s.out.Result = &r
		deadline.Stop()
		closeStdin()
	case wire.TypeHello:
		s.protocolError(fmt.Sprintf("the harness sent a second hello (line %d)", n))
	default:
		s.protocolError(fmt.Sprintf("line %d from the harness has %s; the harness sends \"event\" and \"result\"", n, describeType(env.Type)))
	}
}

// log appends one harness line to the event log. A failure to write is an
// infrastructure error (disk full) and stops the harness.
func (s *session) log(line []byte) bool {
	s.seq++
	s.out.Lines = s.seq
	if s.opts.EventLog == nil {
		return true
	}
	var b bytes.Buffer
	b.Grow(len(line) + 64)
	b.WriteString(`{"t":"`)
	b.WriteString(time.Now().UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&b, `","seq":%d,"event":`, s.seq)
	b.Write(line)
	b.WriteString("}\n")
	if _, err := s.opts.EventLog.Write(b.Bytes()); err != nil {
		s.fail(state.ClassInfraError, "writing the event log: "+err.Error())
		s.stopNow()
		return false
	}
	return true
}

func (s *session) protocolError(msg string) {
	s.fail(state.ClassProtocolError, msg)
	s.stopNow()
}

// fail records the first error; later ones are consequences.
func (s *session) fail(class state.Class, msg string) {
	if s.out.Class == "" {
		s.out.Class = class
		s.out.Error = msg
	}
	if class != state.ClassAgentTimeout && class != state.ClassInterrupted {
		s.failed = true
	}
}

func (s *session) note(msg string) {
	if s.out.Error == "" {
		s.out.Error = msg
		return
	}
	s.out.Error += "; " + msg
}

func (s *session) waitQuietly() {
	code, err := s.proc.Wait()
	if err == nil {
		s.out.Exited = true
		s.out.ExitCode = code
	}
}

func (s *session) drainStderr(r io.Reader) {
	if r == nil {
		return
	}
	buf := make([]byte, 32<<10)
	var partial []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			s.tailMu.Lock()
			_, _ = s.tail.Write(chunk)
			s.tailMu.Unlock()
			if s.trace != nil {
				partial = append(partial, chunk...)
				for {
					i := bytes.IndexByte(partial, '\n')
					if i < 0 {
						break
					}
					s.trace.line("  stderr: ", partial[:i])
					partial = partial[i+1:]
				}
				if len(partial) > 4096 {
					s.trace.line("  stderr: ", partial)
					partial = partial[:0]
				}
			}
		}
		if err != nil {
			if len(partial) > 0 {
				s.trace.line("  stderr: ", partial)
			}
			return
		}
	}
}

func (s *session) stderrHint() string {
	s.tailMu.Lock()
	last := s.tail.lastLine(200)
	s.tailMu.Unlock()
	if last == "" {
		return ""
	}
	return fmt.Sprintf(" (stderr: %s)", last)
}

// tracer writes trace lines; nil is off.
type tracer struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *tracer) line(prefix string, b []byte) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%s%s\n", prefix, clip(b, 4096))
}

func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "cancelled"
}

func describeType(t string) string {
	if t == "" {
		return "no \"type\" field"
	}
	return fmt.Sprintf("type %q", t)
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}

func quoteList(l []string) string {
	var b bytes.Buffer
	for i, s := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s)
	}
	return b.String()
}
