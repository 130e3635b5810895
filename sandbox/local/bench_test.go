package local_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/sandbox/local"
)

// BenchmarkExecTrue is Exec plus Wait of /bin/true on the local sandbox:
// own process group, cleared environment, pipes, group cleanup. Compare
// with BenchmarkOSExecTrue, the bare cost of starting the same process.
func BenchmarkExecTrue(b *testing.B) {
	inst, err := local.New().Start(context.Background(), sandbox.Spec{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Stop(context.Background())
	req := sandbox.ExecRequest{Command: []string{"true"}}
	for i := 0; i < b.N; i++ {
		p, err := inst.Exec(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); code != 0 || err != nil {
			b.Fatal(code, err)
		}
	}
}

func BenchmarkOSExecTrue(b *testing.B) {
	path, _ := exec.LookPath("true")
	for i := 0; i < b.N; i++ {
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
