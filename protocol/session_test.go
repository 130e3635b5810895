package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
	"github.com/hemra-dev/hemra/state"
)

// bin holds the test harnesses, built once per test run from
// testdata/harnesses/<name> plus the example harness.
var bin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hemra-protocol-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = dir
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	names, _ := filepath.Glob("testdata/harnesses/*")
	for _, n := range names {
		args = append(args, "./"+n)
	}
	args = append(args, "../examples/harness-go")
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test harnesses: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// quick are limits that keep misbehaving sessions short.
var quick = protocol.Options{CancelGrace: 300 * time.Millisecond}

type session struct {
	out    *protocol.Outcome
	inst   sandbox.Instance
	events *bytes.Buffer
	trace  *bytes.Buffer
}

// runHarness runs one test harness through protocol.Exec on a fresh local
// instance.
func runHarness(t *testing.T, ctx context.Context, name string, args any, opts protocol.Options) *session {
	t.Helper()
	prov := local.NewWithOptions(local.Options{Path: os.Getenv("PATH"), Linger: 200 * time.Millisecond})
	inst, err := prov.Start(ctx, sandbox.Spec{Settings: sandbox.Settings{Kind: "local"}, Workspace: t.TempDir(), AttemptID: "a1", Role: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Stop(context.Background()) })
	var rawArgs json.RawMessage
	if args != nil {
		rawArgs, _ = json.Marshal(args)
	}
	p := inst.Paths()
	start := &protocol.StartMessage{Args: rawArgs}
	start.Task.ID = "hello-world"
	start.Task.Instruction = "Create hello.txt containing Hello, world!"
	start.Run.AttemptID = "a1"
	start.Run.Address = "smoke/" + name + "/hello-world#1"
	start.Run.Eval, start.Run.Harness, start.Run.Repetition = "smoke", name, 1
	start.Paths.Workdir, start.Paths.Artifacts, start.Paths.AgentLogs = p.Workdir, p.Artifacts, p.AgentLogs

	s := &session{inst: inst, events: &bytes.Buffer{}, trace: &bytes.Buffer{}}
	opts.EventLog = &lockedBuffer{b: s.events}
	opts.Trace = &lockedBuffer{b: s.trace}
	s.out = protocol.Exec(ctx, inst, sandbox.ExecRequest{Command: []string{filepath.Join(bin, name)}}, start, opts)
	return s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// alongsideGood runs a misbehaving session while a good one runs at the
// same time, and checks that the good one finished as if alone.
func alongsideGood(t *testing.T, run func() *session) *session {
	t.Helper()
	var good, bad *session
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		good = runHarness(t, context.Background(), "harness-go", map[string]string{"file": "hello.txt", "content": "Hello, world!\n", "sleep": "200ms"}, quick)
	}()
	go func() {
		defer wg.Done()
		bad = run()
	}()
	wg.Wait()
	if !good.out.OK() {
		t.Fatalf("the good session next to the misbehaving one failed: class %q: %s", good.out.Class, good.out.Error)
	}
	got, err := os.ReadFile(filepath.Join(good.inst.Paths().Workdir, "hello.txt"))
	if err != nil || string(got) != "Hello, world!\n" {
		t.Fatalf("the good harness's file: %q, %v", got, err)
	}
	return bad
}

func wantFailure(t *testing.T, o *protocol.Outcome, class state.Class, msg string) {
	t.Helper()
	if o.Class != class || !strings.Contains(o.Error, msg) {
		t.Fatalf("outcome: class %q, error %q; want class %q with %q", o.Class, o.Error, class, msg)
	}
	if !o.Exited {
		t.Fatalf("the harness was not seen to exit: %+v", o)
	}
}

func TestGoodHarness(t *testing.T) {
	s := runHarness(t, context.Background(), "harness-go", map[string]string{"file": "hello.txt", "content": "Hello, world!\n"}, protocol.Options{})
	o := s.out
	if !o.OK() {
		t.Fatalf("class %q error %q stderr %q", o.Class, o.Error, o.StderrTail)
	}
	if o.Hello.Harness.Name != "harness-go" || o.Hello.Harness.Version != "0.1.0" {
		t.Errorf("hello: %+v", o.Hello)
	}
	if string(o.Result.Output) != `"Hello, world!\n"` {
		t.Errorf("output %s", o.Result.Output)
	}
	if o.ExitCode != 0 || o.Stopped != "" {
		t.Errorf("exit %d, stopped %q", o.ExitCode, o.Stopped)
	}

	// The event log: every harness message, in order, with hemra's
	// timestamp and sequence number.
	var kinds []string
	sc := bufio.NewScanner(s.events)
	for i := 1; sc.Scan(); i++ {
		var rec protocol.LogRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("event log line %d: %v: %s", i, err, sc.Bytes())
		}
		if rec.Seq != i || rec.T.IsZero() {
			t.Errorf("event log line %d: seq %d, t %v", i, rec.Seq, rec.T)
		}
		var m struct{ Type, Kind string }
		json.Unmarshal(rec.Event, &m)
		kinds = append(kinds, strings.TrimSuffix(m.Type+":"+m.Kind, ":"))
	}
	want := "hello event:message event:tool_call event:tool_result event:message event:usage result"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("event log:\n got %s\nwant %s", got, want)
	}
	if o.Events != 5 || o.Lines != 7 {
		t.Errorf("events %d lines %d", o.Events, o.Lines)
	}

	// The trace shows both directions.
	tr := s.trace.String()
	for _, w := range []string{`← {"type":"hello"`, `→ {"type":"run.start","protocol":"hemra.protocol/1"`, `← {"type":"result","status":"ok"`} {
		if !strings.Contains(tr, w) {
			t.Errorf("trace lacks %q:\n%s", w, tr)
		}
	}

	// What the harness left behind.
	got, _ := os.ReadFile(filepath.Join(s.inst.Paths().Workdir, "hello.txt"))
	if string(got) != "Hello, world!\n" {
		t.Errorf("hello.txt: %q", got)
	}
	set, err := protocol.CollectArtifacts(s.inst.Paths().Artifacts, protocol.ArtifactLimits{})
	if err != nil || len(set.Files) != 1 || set.Files[0].Path != "summary.json" {
		t.Fatalf("artifacts: %+v, %v", set, err)
	}
}

func TestNoHandshake(t *testing.T) {
	bad := alongsideGood(t, func() *session {
		opts := quick
		opts.HandshakeTimeout = 300 * time.Millisecond
		return runHarness(t, context.Background(), "silent", nil, opts)
	})
	wantFailure(t, bad.out, state.ClassProtocolError, "the harness sent no hello within 300ms")
	if bad.out.Stopped != protocol.StoppedTerminate || bad.out.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("stopped %q exit %d; want SIGTERM", bad.out.Stopped, bad.out.ExitCode)
	}
}

func TestMalformedJSON(t *testing.T) {
	bad := alongsideGood(t, func() *session { return runHarness(t, context.Background(), "badjson", nil, quick) })
	wantFailure(t, bad.out, state.ClassProtocolError, `line 2 from the harness is not valid JSON (unexpected end of JSON input`)
	if !strings.Contains(bad.out.Error, `{"type":"event","kind":"log","data":{"message":"half`) {
		t.Errorf("the error does not quote the line: %s", bad.out.Error)
	}
}

func TestLineOverOneMiB(t *testing.T) {
	bad := alongsideGood(t, func() *session { return runHarness(t, context.Background(), "longline", nil, quick) })
	wantFailure(t, bad.out, state.ClassProtocolError, "the harness sent a line longer than the 1 MiB limit (line 2)")
	if bad.out.Lines != 1 {
		t.Errorf("%d lines logged; only the hello should be", bad.out.Lines)
	}
}

func TestEventFlood(t *testing.T) {
	bad := alongsideGood(t, func() *session {
		opts := quick
		opts.MaxEventBytes = 1 << 20
		return runHarness(t, context.Background(), "flood", nil, opts)
	})
	wantFailure(t, bad.out, state.ClassProtocolError, "the harness sent more than 1 MiB of events")
	if bad.out.EventBytes > 1<<20+1<<10 || bad.events.Len() > 2<<20 {
		t.Errorf("kept %d bytes of events, logged %d bytes, over the limit", bad.out.EventBytes, bad.events.Len())
	}
}

func TestIgnoresCancelIsKilled(t *testing.T) {
	bad := alongsideGood(t, func() *session {
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(200*time.Millisecond, func() { cancel(fmt.Errorf("operator pressed Ctrl-C")) })
		return runHarness(t, ctx, "ignorecancel", nil, quick)
	})
	wantFailure(t, bad.out, state.ClassInterrupted, "interrupted: operator pressed Ctrl-C")
	if bad.out.Stopped != protocol.StoppedKill || bad.out.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("stopped %q exit %d; want SIGKILL", bad.out.Stopped, bad.out.ExitCode)
	}
	if !strings.Contains(bad.trace.String(), `→ {"type":"run.cancel","reason":"interrupted by the operator"}`) {
		t.Errorf("run.cancel was not sent first:\n%s", bad.trace)
	}
}

func TestDeadlineIsAgentTimeout(t *testing.T) {
	opts := quick
	opts.Deadline = 300 * time.Millisecond
	s := runHarness(t, context.Background(), "ignorecancel", nil, opts)
	wantFailure(t, s.out, state.ClassAgentTimeout, "the harness did not finish within its 300ms deadline")
	if s.out.Stopped != protocol.StoppedKill {
		t.Errorf("stopped %q", s.out.Stopped)
	}
}

func TestCancelledHarnessReportsResult(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	s := runHarness(t, ctx, "harness-go", map[string]string{"file": "a.txt", "sleep": "1h"}, protocol.Options{})
	o := s.out
	if o.Class != state.ClassInterrupted || o.Result == nil || o.Result.Status != "error" || !strings.Contains(o.Result.Error, "cancelled by hemra: interrupted by the operator") {
		t.Fatalf("class %q result %+v", o.Class, o.Result)
	}
	if o.Stopped != protocol.StoppedCancel || o.ExitCode != 0 {
		t.Errorf("stopped %q exit %d: the harness should have ended on run.cancel alone", o.Stopped, o.ExitCode)
	}
}

func TestForkedChildDoesNotSurvive(t *testing.T) {
	bad := alongsideGood(t, func() *session { return runHarness(t, context.Background(), "forker", nil, quick) })
	if !bad.out.OK() {
		t.Fatalf("class %q: %s", bad.out.Class, bad.out.Error)
	}
	_, after, ok := strings.Cut(bad.events.String(), `"message":"child `)
	if !ok {
		t.Fatalf("no child pid in the events:\n%s", bad.events)
	}
	pid, err := strconv.Atoi(after[:strings.IndexByte(after, '"')])
	if err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the harness's child %d outlived the session", pid)
	}
}

// alive reports whether pid is a running process (a zombie is dead: it
// only waits for a parent to reap it).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func TestExitWithoutResult(t *testing.T) {
	bad := alongsideGood(t, func() *session { return runHarness(t, context.Background(), "noresult", nil, quick) })
	wantFailure(t, bad.out, state.ClassProtocolError, "the harness exited with code 3 without sending a result (stderr: boom: the model API refused the key)")
	if !strings.Contains(bad.out.StderrTail, "boom") {
		t.Errorf("stderr tail %q", bad.out.StderrTail)
	}
}

func TestMessageAfterResult(t *testing.T) {
	s := runHarness(t, context.Background(), "afterresult", nil, quick)
	wantFailure(t, s.out, state.ClassProtocolError, `the harness sent a "event" message after its result (line 3)`)
}

func TestArtifactSymlinkIsRefused(t *testing.T) {
	bad := alongsideGood(t, func() *session {
		return runHarness(t, context.Background(), "artifacts", map[string]string{"mode": "symlink"}, quick)
	})
	if !bad.out.OK() {
		t.Fatalf("class %q: %s", bad.out.Class, bad.out.Error)
	}
	set, err := protocol.CollectArtifacts(bad.inst.Paths().Artifacts, protocol.ArtifactLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Files) != 1 || set.Files[0].Path != "notes.txt" {
		t.Errorf("files %+v; want only notes.txt", set.Files)
	}
	if len(set.Skipped) != 1 || set.Skipped[0].Path != "passwd" || !strings.Contains(set.Skipped[0].Reason, "symbolic link") {
		t.Errorf("skipped %+v; want passwd as a symbolic link", set.Skipped)
	}
}

func TestArtifactOverQuota(t *testing.T) {
	bad := alongsideGood(t, func() *session {
		return runHarness(t, context.Background(), "artifacts", map[string]string{"mode": "big"}, quick)
	})
	_, err := protocol.CollectArtifacts(bad.inst.Paths().Artifacts, protocol.ArtifactLimits{MaxFileBytes: 1 << 20})
	if err == nil || err.Error() != "artifact big.bin: 2 MiB is over the 1 MiB per-file quota" {
		t.Fatalf("error %v", err)
	}
}

func TestNoStdinIsInfraError(t *testing.T) {
	prov := local.New()
	inst, err := prov.Start(context.Background(), sandbox.Spec{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop(context.Background())
	proc, err := inst.Exec(context.Background(), sandbox.ExecRequest{Command: []string{filepath.Join(bin, "silent")}})
	if err != nil {
		t.Fatal(err)
	}
	o := protocol.Run(context.Background(), proc, &protocol.StartMessage{}, quick)
	if o.Class != state.ClassInfraError {
		t.Fatalf("class %q: %s", o.Class, o.Error)
	}
}

func TestStartFailureIsInfraError(t *testing.T) {
	prov := local.New()
	inst, err := prov.Start(context.Background(), sandbox.Spec{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop(context.Background())
	o := protocol.Exec(context.Background(), inst, sandbox.ExecRequest{Command: []string{"no-such-harness-xyz"}}, &protocol.StartMessage{}, quick)
	if o.Class != state.ClassInfraError || !strings.Contains(o.Error, "no-such-harness-xyz: not found in PATH") {
		t.Fatalf("class %q: %s", o.Class, o.Error)
	}
}

// TestEveryGoroutineEnds runs misbehaving sessions back to back and checks
// that nothing they started is left running in hemra afterwards.
func TestEveryGoroutineEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	opts := quick
	opts.HandshakeTimeout = 200 * time.Millisecond
	opts.MaxEventBytes = 256 << 10
	for _, name := range []string{"silent", "flood", "longline", "ignorecancel", "forker", "badjson"} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		runHarness(t, ctx, name, nil, opts)
		cancel()
	}
	// Bounded wait: streams close at most a linger after their group dies.
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
