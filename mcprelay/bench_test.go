package mcprelay_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hemra-dev/hemra/mcprelay"
)

// BenchmarkToolCall measures one tools/call of a real SDK server from a
// real SDK client, over the server's stdio directly ("stdio") and through
// hemra's connector, the socket and the relay, with the call and its
// result recorded to an event log file ("relay"). The difference is what
// hemra adds per call (docs/mcp.md gives the figure):
//
//	go test -run '^$' -bench BenchmarkToolCall -benchtime 3s -count 5 ./mcprelay
func BenchmarkToolCall(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "answer.txt"), []byte("forty-two\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	args := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "answer.txt"}}
	run := func(b *testing.B, cs *mcp.ClientSession) {
		ctx := context.Background()
		// Warm up both ends before timing.
		for i := 0; i < 20; i++ {
			if _, err := cs.CallTool(ctx, args); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := cs.CallTool(ctx, args)
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
		b.StopTimer()
	}
	b.Run("stdio", func(b *testing.B) {
		c := serverCommand(b, "serve", root)
		cmd := exec.Command(c.Argv[0])
		cmd.Dir = c.Dir
		for k, v := range c.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})
	b.Run("relay", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "events.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		s, err := mcprelay.Open(mcprelay.Options{EventLog: f, MaxEventBytes: 1 << 40, StopGrace: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if err := s.StartHost("files", serverCommand(b, "serve", root)); err != nil {
			b.Fatal(err)
		}
		cs := connect(b, context.Background(), connector(b), s.SocketPath("files"))
		defer cs.Close()
		run(b, cs)
	})
}
