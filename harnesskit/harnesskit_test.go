package harnesskit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/harnesskit"
	"github.com/hemra-dev/hemra/protocol/wire"
)

// fakeHemra plays hemra's side of the protocol over pipes.
type fakeHemra struct {
	toHarness   *io.PipeWriter
	fromHarness *bufio.Scanner
	done        chan error
}

func serve(t *testing.T, fn harnesskit.Func) *fakeHemra {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f := &fakeHemra{toHarness: inW, fromHarness: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() {
		err := harnesskit.Serve(context.Background(), inR, outW, harnesskit.Info{Name: "kit-test", Version: "1.2.3"}, fn)
		outW.Close()
		f.done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	return f
}

func (f *fakeHemra) next(t *testing.T) map[string]any {
	t.Helper()
	if !f.fromHarness.Scan() {
		t.Fatalf("harness stopped talking: %v", f.fromHarness.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(f.fromHarness.Bytes(), &m); err != nil {
		t.Fatalf("harness sent %q: %v", f.fromHarness.Bytes(), err)
	}
	return m
}

func (f *fakeHemra) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := f.toHarness.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func startMsg() wire.Start {
	return wire.Start{
		Type: wire.TypeRunStart, Protocol: wire.Version,
		Task: wire.Task{ID: "t1", Instruction: "say hi"},
		Args: json.RawMessage(`{"greeting":"hi"}`),
	}
}

func TestServeSpeaksTheProtocol(t *testing.T) {
	f := serve(t, func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
		var args struct{ Greeting string }
		if err := r.Args(&args); err != nil {
			return nil, err
		}
		r.Message("assistant", args.Greeting+": "+r.Instruction())
		r.ToolCall("c1", "shell", map[string]string{"cmd": "ls"})
		r.ToolResult("c1", "a.txt", false)
		r.Log("info", "done")
		r.Usage(harnesskit.Usage{Model: "m", InputTokens: 3})
		return &harnesskit.Result{Output: map[string]int{"answer": 42}, Usage: &harnesskit.Usage{InputTokens: 3}}, nil
	})
	hello := f.next(t)
	if hello["type"] != "hello" || hello["protocol"] != wire.Version || hello["harness"].(map[string]any)["name"] != "kit-test" {
		t.Fatalf("hello: %v", hello)
	}
	f.send(t, startMsg())
	var kinds []string
	for {
		m := f.next(t)
		if m["type"] == "result" {
			if m["status"] != "ok" || m["output"].(map[string]any)["answer"] != 42.0 {
				t.Errorf("result: %v", m)
			}
			break
		}
		kinds = append(kinds, m["kind"].(string))
		if m["kind"] == "message" && m["data"].(map[string]any)["content"] != "hi: say hi" {
			t.Errorf("message: %v", m)
		}
	}
	if got := strings.Join(kinds, " "); got != "message tool_call tool_result log usage" {
		t.Errorf("events: %s", got)
	}
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
}

func TestRunCancelCancelsTheContext(t *testing.T) {
	f := serve(t, func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
		r.Log("info", "waiting")
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	f.next(t)
	f.send(t, startMsg())
	f.next(t) // the log: the harness is running
	f.send(t, wire.Cancel{Type: wire.TypeRunCancel, Reason: "deadline reached"})
	res := f.next(t)
	if res["type"] != "result" || res["status"] != "error" || res["error"] != "cancelled by hemra: deadline reached" {
		t.Fatalf("result: %v", res)
	}
	<-f.done
}

func TestErrorsAndPanicsBecomeErrorResults(t *testing.T) {
	for name, fn := range map[string]harnesskit.Func{
		"error": func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
			return nil, errors.New("model refused")
		},
		"panic": func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
			panic("model refused")
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := serve(t, fn)
			f.next(t)
			f.send(t, startMsg())
			res := f.next(t)
			if res["status"] != "error" || !strings.Contains(res["error"].(string), "model refused") {
				t.Fatalf("result: %v", res)
			}
			if err := <-f.done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNoRunStartIsAnError(t *testing.T) {
	f := serve(t, func(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
		t.Error("the harness ran without run.start")
		return nil, nil
	})
	f.next(t)
	f.send(t, wire.Cancel{Type: wire.TypeRunCancel, Reason: "x"})
	if err := <-f.done; err == nil || !strings.Contains(err.Error(), `expected run.start, got "run.cancel"`) {
		t.Fatalf("error %v", err)
	}
}
