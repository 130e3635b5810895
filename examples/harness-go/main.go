// Command harness-go is an example hemra harness written with harnesskit.
// It stands in for an agent: it reads the task's instruction, writes a
// file in the working directory, keeps a summary as an artifact, reports
// a few events, and returns ok. It builds with CGO_ENABLED=0, so the same
// binary runs on the local sandbox and in a container.
//
// Its args (the harness block's `args`) choose what it writes:
//
//	args = { file = "hello.txt", content = "Hello, world!\n" }
//
// Without args it writes answer.txt holding the instruction's first line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hemra-dev/hemra/harnesskit"
)

type args struct {
	File    string `json:"file"`
	Content string `json:"content"`
	// Sleep makes the harness wait (a Go duration) before answering, to
	// try cancellation and deadlines.
	Sleep string `json:"sleep"`
}

func main() {
	harnesskit.MainWith(harnesskit.Info{Name: "harness-go", Version: "0.1.0"}, run)
}

func run(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
	var a args
	if err := r.Args(&a); err != nil {
		return nil, fmt.Errorf("reading args: %w", err)
	}
	instruction := strings.TrimSpace(r.Instruction())
	if instruction == "" && len(r.Input()) > 0 {
		instruction = string(r.Input())
	}
	if a.File == "" {
		a.File = "answer.txt"
		first, _, _ := strings.Cut(instruction, "\n")
		a.Content = first + "\n"
	}
	if filepath.IsAbs(a.File) || strings.HasPrefix(filepath.Clean(a.File), "..") {
		return nil, fmt.Errorf("args.file %q must be a path inside the working directory", a.File)
	}
	r.Message("user", instruction)

	if a.Sleep != "" {
		d, err := time.ParseDuration(a.Sleep)
		if err != nil {
			return nil, fmt.Errorf("args.sleep: %w", err)
		}
		r.Logf("sleeping %s", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}

	target := filepath.Join(r.Workdir(), a.File)
	r.ToolCall("call-1", "write_file", map[string]string{"path": a.File, "content": a.Content})
	err := os.MkdirAll(filepath.Dir(target), 0o755)
	if err == nil {
		err = os.WriteFile(target, []byte(a.Content), 0o644)
	}
	if err != nil {
		r.ToolResult("call-1", err.Error(), true)
		return nil, err
	}
	r.ToolResult("call-1", fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.File), false)
	r.Message("assistant", "I wrote "+a.File+".")

	summary, _ := json.MarshalIndent(map[string]any{
		"task":    r.Start.Task.ID,
		"attempt": r.Start.Run.AttemptID,
		"file":    a.File,
		"bytes":   len(a.Content),
	}, "", "  ")
	if dir := r.ArtifactsDir(); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(summary, '\n'), 0o644); err != nil {
			r.Log("warn", "could not write the summary artifact: "+err.Error())
		}
	}
	usage := harnesskit.Usage{Model: "none", InputTokens: int64(len(instruction)), OutputTokens: int64(len(a.Content))}
	r.Usage(usage)
	return &harnesskit.Result{Output: a.Content, Usage: &usage}, nil
}
