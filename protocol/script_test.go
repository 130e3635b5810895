package protocol_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
	"github.com/hemra-dev/hemra/state"
)

const hello = `echo '{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"sh"}}'; read start; `

// TestProtocolViolations drives small /bin/sh harnesses, each breaking one
// rule, and checks the recorded error says which.
func TestProtocolViolations(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"wrong version", `echo '{"type":"hello","protocol":"hemra.protocol/0"}'; sleep 60`,
			`the harness speaks protocol "hemra.protocol/0"; hemra speaks "hemra.protocol/1"`},
		{"event before hello", `echo '{"type":"event","kind":"log","data":{}}'; sleep 60`,
			`the harness's first line must be a hello, got type "event"`},
		{"not an object", hello + `echo '[1,2]'; sleep 60`,
			`line 2 from the harness is not a JSON object: [1,2]`},
		{"unknown kind", hello + `echo '{"type":"event","kind":"thought","data":{}}'; sleep 60`,
			`event on line 2 has kind "thought"; the kinds are "message", "tool_call", "tool_result", "log", "usage"`},
		{"unknown type", hello + `echo '{"type":"progress"}'; sleep 60`,
			`line 2 from the harness has type "progress"; the harness sends "event" and "result"`},
		{"no type", hello + `echo '{"kind":"log"}'; sleep 60`,
			`line 2 from the harness has no "type" field; the harness sends "event" and "result"`},
		{"bad status", hello + `echo '{"type":"result","status":"done"}'; sleep 60`,
			`the result on line 2 has status "done"; it must be "ok" or "error"`},
		{"second hello", hello + `echo '{"type":"hello","protocol":"hemra.protocol/1"}'; sleep 60`,
			`the harness sent a second hello (line 2)`},
		{"closes stdout", hello + `exec >&-; sleep 60`,
			`the harness closed its stdout without sending a result`},
		{"exits before hello", `echo 'python3: no module named agent' >&2; exit 1`,
			`the harness exited with code 1 before sending its hello (stderr: python3: no module named agent)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := runScript(t, tc.script, quick)
			if o.Class != state.ClassProtocolError || o.Error != tc.want {
				t.Fatalf("class %q error:\n %s\nwant:\n %s", o.Class, o.Error, tc.want)
			}
		})
	}
}

func TestExitCodeAfterResultDoesNotMatter(t *testing.T) {
	o := runScript(t, hello+`echo '{"type":"result","status":"ok","output":1}'; exit 9`, quick)
	if !o.OK() || o.ExitCode != 9 {
		t.Fatalf("class %q error %q exit %d", o.Class, o.Error, o.ExitCode)
	}
}

func TestHarnessThatLingersAfterResultIsStopped(t *testing.T) {
	o := runScript(t, hello+`echo '{"type":"result","status":"ok"}'; trap '' TERM; while :; do sleep 1; done`, quick)
	if !o.OK() || o.Stopped != protocol.StoppedKill {
		t.Fatalf("class %q error %q stopped %q", o.Class, o.Error, o.Stopped)
	}
}

func TestStderrTailIsBounded(t *testing.T) {
	opts := quick
	opts.StderrTailBytes = 1024
	o := runScript(t, `i=0; while [ $i -lt 500 ]; do echo "stderr line $i" >&2; i=$((i+1)); done; `+hello+`echo '{"type":"result","status":"ok"}'`, opts)
	if !o.OK() {
		t.Fatalf("%s: %s", o.Class, o.Error)
	}
	if len(o.StderrTail) > 1024 || !strings.HasPrefix(o.StderrTail, "stderr line ") || !strings.HasSuffix(o.StderrTail, "stderr line 499\n") {
		t.Fatalf("tail (%d bytes): %q", len(o.StderrTail), o.StderrTail)
	}
}

func runScript(t *testing.T, script string, opts protocol.Options) *protocol.Outcome {
	t.Helper()
	prov := local.NewWithOptions(local.Options{Path: os.Getenv("PATH"), Linger: 100 * time.Millisecond})
	inst, err := prov.Start(context.Background(), sandbox.Spec{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop(context.Background())
	return protocol.Exec(context.Background(), inst, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}, &protocol.StartMessage{}, opts)
}

func TestHarnessThatNeverReadsStdinDoesNotBlockHemra(t *testing.T) {
	prov := local.NewWithOptions(local.Options{Path: os.Getenv("PATH")})
	inst, err := prov.Start(context.Background(), sandbox.Spec{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Stop(context.Background())
	// run.start is far bigger than a pipe's buffer and nobody reads it.
	start := &protocol.StartMessage{}
	start.Task.Instruction = strings.Repeat("instruction ", 200_000)
	script := `echo '{"type":"hello","protocol":"hemra.protocol/1"}'; echo '{"type":"result","status":"ok"}'`
	o := protocol.Exec(context.Background(), inst, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}, start, quick)
	if !o.OK() {
		t.Fatalf("%s: %s", o.Class, o.Error)
	}
}

type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

func TestEventLogFailureIsInfraError(t *testing.T) {
	opts := quick
	opts.EventLog = fullDisk{}
	o := runScript(t, hello+`echo '{"type":"result","status":"ok"}'`, opts)
	if o.Class != state.ClassInfraError || o.Error != "writing the event log: no space left on device" {
		t.Fatalf("class %q error %q", o.Class, o.Error)
	}
}
