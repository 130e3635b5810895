package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hemra-dev/hemra/internal/testimages"
)

// BenchmarkDockerApply200 measures, in one run, `hemra apply` of 200
// trivial attempts (a JSONL task each, the example harness in the docker
// sandbox speaking the protocol, the built-in verifier) against 200 bare
// `docker run --rm` of the same image and command through the client API,
// both 4 at a time, and reports the ratio of wall times.
//
//	go test ./cmd/hemra -run '^$' -bench DockerApply200 -benchtime 1x
func BenchmarkDockerApply200(b *testing.B) {
	const n, parallelism = 200, 4
	cli := testimages.Client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	img, err := testimages.BuildGoBinaryImage(ctx, cli, "github.com/hemra-dev/hemra/examples/harness-go", "harness-go")
	if err != nil {
		b.Fatal(err)
	}
	command := []string{"/usr/local/bin/harness-go"}
	// Bare runs and applies alternate in rounds, so that both see the
	// same load on a shared engine.
	const rounds = 10
	perRound := n / rounds
	for i := 0; i < b.N; i++ {
		var bare, hemra time.Duration
		for r := 0; r < rounds; r++ {
			bare += timeBare(b, cli, img, command, perRound, parallelism)
			hemra += timeApply(b, img, command[0], perRound, parallelism)
		}
		b.ReportMetric(bare.Seconds(), "bare-s")
		b.ReportMetric(hemra.Seconds(), "hemra-s")
		b.ReportMetric(hemra.Seconds()/bare.Seconds(), "ratio")
	}
}

// timeApply times `hemra apply` of n JSONL attempts in a new eval directory.
func timeApply(b *testing.B, img, command string, n, parallelism int) time.Duration {
	dir := b.TempDir()
	var lines strings.Builder
	for t := 1; t <= n; t++ {
		fmt.Fprintf(&lines, "{\"id\":\"t%d\",\"input\":\"hi\",\"target\":\"ok\"}\n", t)
	}
	os.WriteFile(filepath.Join(dir, "inputs.jsonl"), []byte(lines.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`sandbox "box" {
  image = "`+img+`"
}
harness "h" {
  command = ["`+command+`"]
  sandbox = sandbox.box
  args    = { file = "out.txt", content = "ok" }
}
dataset "d" {
  source = "./inputs.jsonl"
}
verifier "v" {
  match = "exact"
}
eval "bench" {
  dataset   = dataset.d
  harnesses = [harness.h]
  verifier  = verifier.v
}
`), 0o644)
	env := []string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}
	start := time.Now()
	var out strings.Builder
	code := Main([]string{"-chdir", dir, "apply", "-auto-approve", "-parallelism", fmt.Sprint(parallelism)}, strings.NewReader(""), &out, &out, env)
	took := time.Since(start)
	if code != 0 || !strings.Contains(out.String(), fmt.Sprintf("Apply complete: %d attempts", n)) {
		b.Fatalf("apply: %d\n%s", code, out.String())
	}
	return took
}

func timeBare(b *testing.B, cli *client.Client, img string, cmd []string, n, parallelism int) time.Duration {
	start := time.Now()
	work := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < parallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := bareRun(cli, img, cmd); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}

// bareRun is `docker run --rm --network none IMAGE CMD` through the API.
func bareRun(cli *client.Client, img string, cmd []string) error {
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: cmd, AttachStdout: true, AttachStderr: true},
		&container.HostConfig{NetworkMode: "none", AutoRemove: true}, nil, nil, "")
	if err != nil {
		return err
	}
	att, err := cli.ContainerAttach(ctx, c.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return err
	}
	defer att.Close()
	wait, errc := cli.ContainerWait(ctx, c.ID, container.WaitConditionRemoved)
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return err
	}
	stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	select {
	case <-wait:
	case err := <-errc:
		return err
	}
	return nil
}
