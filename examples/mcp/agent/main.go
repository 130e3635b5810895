// Command agent is an example hemra harness whose "agent" uses an MCP
// server: it connects to each server listed in run.start with the
// official Go SDK's client, running the server's command (hemra's
// connector) as its stdio server, exactly as an MCP client such as an
// agent CLI would, and calls one tool. The task's input says which:
//
//	{"server": "files", "tool": "read_file", "arguments": {"path": "answer.txt"}}
//
// The tool's text is the harness's output, so a JSONL dataset can compare
// it with the task's target. It builds with CGO_ENABLED=0 and runs in a
// FROM scratch image.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hemra-dev/hemra/harnesskit"
)

type input struct {
	Server    string         `json:"server"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

func main() {
	harnesskit.MainWith(harnesskit.Info{Name: "mcp-agent", Version: "0.1.0"}, run)
}

func run(ctx context.Context, r *harnesskit.Run) (*harnesskit.Result, error) {
	var in input
	if err := json.Unmarshal(r.Input(), &in); err != nil {
		return nil, fmt.Errorf("task input: %w", err)
	}
	srv, ok := r.MCPServer(in.Server)
	if !ok || len(srv.Command) == 0 {
		return nil, fmt.Errorf("run.start lists no stdio MCP server %q", in.Server)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-agent", Version: "0.1.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.CommandContext(ctx, srv.Command[0], srv.Command[1:]...)}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to MCP server %q through %s: %w", in.Server, strings.Join(srv.Command, " "), err)
	}
	defer cs.Close()
	r.ToolCall("call-1", in.Tool, in.Arguments)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: in.Tool, Arguments: in.Arguments})
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", in.Tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	r.ToolResult("call-1", text.String(), res.IsError)
	if res.IsError {
		return nil, fmt.Errorf("%s answered an error: %s", in.Tool, text.String())
	}
	return &harnesskit.Result{Output: text.String()}, nil
}
