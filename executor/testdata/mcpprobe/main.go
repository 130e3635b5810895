// Command mcpprobe is a test harness for MCP attempts: a static program
// for a FROM scratch image whose agent, an MCP client of the official Go
// SDK, reaches the attempt's server through the command run.start gives
// (hemra's connector) and calls one tool. It answers with what it saw:
//
//	{"answer": <the tool's text>, "is_error": bool,
//	 "interfaces": [...], "mcp_dir": [...], "dial": "<error dialling out>"}
//
// The task's input (or, for a Harbor task, the harness's args) is
// {"server": ..., "tool": ..., "arguments": {...}}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hemra-dev/hemra/harnesskit"
)

type input struct {
	Server    string         `json:"server"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

type report struct {
	Answer     string   `json:"answer"`
	IsError    bool     `json:"is_error"`
	Interfaces []string `json:"interfaces"`
	MCPDir     []string `json:"mcp_dir"`
	Dial       string   `json:"dial"`
	Env        []string `json:"env"`
}

func main() {
	harnesskit.MainWith(harnesskit.Info{Name: "mcpprobe", Version: "1"}, run)
}

func run(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
	var in input
	if len(r.Input()) > 0 {
		if err := json.Unmarshal(r.Input(), &in); err != nil {
			return nil, err
		}
	} else if err := r.Args(&in); err != nil { // a Harbor task: the harness's args say
		return nil, err
	}
	var rep report
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		rep.Interfaces = append(rep.Interfaces, i.Name)
	}
	if entries, err := os.ReadDir(os.Getenv("HEMRA_MCP_DIR")); err == nil {
		for _, e := range entries {
			rep.MCPDir = append(rep.MCPDir, e.Name())
		}
	}
	if c, err := net.DialTimeout("tcp", "192.0.2.1:80", 2*time.Second); err != nil {
		rep.Dial = err.Error()
	} else {
		c.Close()
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		rep.Env = append(rep.Env, k)
	}
	srv, ok := r.MCPServer(in.Server)
	if !ok {
		return nil, fmt.Errorf("no MCP server %q in run.start", in.Server)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "mcpprobe", Version: "1"}, nil)
	var transport mcp.Transport
	if srv.Transport == "streamable-http" {
		transport = &mcp.StreamableClientTransport{Endpoint: srv.URL}
	} else {
		transport = &mcp.CommandTransport{Command: exec.CommandContext(ctx, srv.Command[0], srv.Command[1:]...)}
	}
	cs, err := cl.Connect(ctx, transport, nil)
	for i := 0; err != nil && srv.Transport == "streamable-http" && i < 50; i++ {
		time.Sleep(200 * time.Millisecond) // a compose service still starting
		cs, err = cl.Connect(ctx, transport, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: in.Tool, Arguments: in.Arguments})
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", in.Tool, err)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			rep.Answer += t.Text
		}
	}
	rep.IsError = res.IsError
	return &harnesskit.Result{Output: rep}, nil
}
