package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
)

// BenchmarkSession is one whole protocol session with the example harness
// on the local sandbox: start, hello, run.start, six events to the event
// log, result, exit, group cleanup. Compare with BenchmarkBareHarness, the
// same binary fed the same run.start by os/exec alone.
func BenchmarkSession(b *testing.B) {
	prov := local.New()
	inst, err := prov.Start(context.Background(), sandbox.Spec{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Stop(context.Background())
	p := inst.Paths()
	start := &protocol.StartMessage{Args: json.RawMessage(`{"file":"hello.txt","content":"Hello, world!\n"}`)}
	start.Task.ID, start.Task.Instruction = "hello-world", "Create hello.txt"
	start.Paths.Workdir, start.Paths.Artifacts, start.Paths.AgentLogs = p.Workdir, p.Artifacts, p.AgentLogs
	req := sandbox.ExecRequest{Command: []string{filepath.Join(bin, "harness-go")}}
	var log bytes.Buffer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		log.Reset()
		o := protocol.Exec(context.Background(), inst, req, start, protocol.Options{EventLog: &log})
		if !o.OK() {
			b.Fatalf("%s: %s", o.Class, o.Error)
		}
	}
}

func BenchmarkBareHarness(b *testing.B) {
	ws := b.TempDir()
	app, arts := filepath.Join(ws, "app"), filepath.Join(ws, "artifacts")
	os.MkdirAll(app, 0o755)
	os.MkdirAll(arts, 0o755)
	start := &protocol.StartMessage{Type: "run.start", Protocol: protocol.Version, Args: json.RawMessage(`{"file":"hello.txt","content":"Hello, world!\n"}`)}
	start.Task.ID, start.Task.Instruction = "hello-world", "Create hello.txt"
	start.Paths.Workdir, start.Paths.Artifacts = app, arts
	line, _ := json.Marshal(start)
	line = append(line, '\n')
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(filepath.Join(bin, "harness-go"))
		cmd.Stdin = bytes.NewReader(line)
		cmd.Stdout = io.Discard
		cmd.Dir = app
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
