package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/protocol"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/state"
)

// A protocol harness that closes its stdout and keeps running is noticed
// within seconds on docker too (as on local), whether it is the
// container's main process or runs through exec, instead of waiting for
// its whole deadline.
func TestHarnessClosingStdoutIsNoticed(t *testing.T) {
	_, p, ref := engine(t)
	const script = `echo '{"type":"hello","protocol":"hemra.protocol/1","harness":{"name":"sh"}}'; read start; exec >&-; sleep 60`
	for _, oneCommand := range []bool{true, false} {
		name := "exec"
		if oneCommand {
			name = "main process"
		}
		t.Run(name, func(t *testing.T) {
			inst := start(t, p, sandbox.Spec{Settings: sandbox.Settings{Image: ref, Network: "none"}, OneCommand: oneCommand, Workspace: t.TempDir()})
			begin := time.Now()
			o := protocol.Exec(context.Background(), inst, sandbox.ExecRequest{Command: []string{"sh", "-c", script}},
				&protocol.StartMessage{}, protocol.Options{Deadline: 50 * time.Second, CancelGrace: 300 * time.Millisecond})
			took := time.Since(begin)
			if o.Class != state.ClassProtocolError || !strings.Contains(o.Error, "closed its stdout") {
				t.Fatalf("class %q error %q, want the protocol error for a closed stdout", o.Class, o.Error)
			}
			if took > 20*time.Second {
				t.Fatalf("noticed after %s; the local sandbox notices in about 2 s", took)
			}
			t.Logf("noticed in %s", took.Round(100*time.Millisecond))
		})
	}
}
