// Command files-server is an example MCP server (the official Go SDK,
// stdio transport) for hemra's mcp blocks. hemra runs it on the host, one
// per attempt, and the agent in the sandbox reaches it through
// /hemra/bin/mcp-connect:
//
//	mcp "files" {
//	  command = ["files-server"]
//	  env     = ["FILES_ROOT"]
//	}
//
// Tools:
//
//	read_file {path}  the content of a file under $FILES_ROOT (no escape: a
//	                  path is taken relative to the root, ".." removed)
//	environment {}    the names of the variables the server runs with, its
//	                  working directory, and the SHA-256 of each value (a
//	                  value itself is never answered: answers are recorded)
//	wait {seconds}    answers after that long (to try deadlines)
//
// With -http ADDR it serves MCP's streamable HTTP transport at
// http://ADDR/mcp instead of stdio: a service of a Harbor task's compose
// environment, as a URL server of [[environment.mcp_servers]].
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readArgs struct {
	Path string `json:"path" jsonschema:"a file path relative to the server's root folder"`
}

type waitArgs struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to wait before answering"`
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP at http://ADDR/mcp instead of stdio")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "files-server", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file under the server's root folder."}, readFile)
	mcp.AddTool(s, &mcp.Tool{Name: "environment", Description: "The server's variable names, value hashes and working directory."}, environment)
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Answer after a number of seconds."}, wait)
	if *addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		log.Fatal(http.ListenAndServe(*addr, mux))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatalf("files-server: %v", err)
	}
}

func textResult(s string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func readFile(ctx context.Context, req *mcp.CallToolRequest, a readArgs) (*mcp.CallToolResult, any, error) {
	root := os.Getenv("FILES_ROOT")
	if root == "" {
		return textResult("FILES_ROOT is not set", true), nil, nil
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.Clean("/"+a.Path)))
	if err != nil {
		return textResult(fmt.Sprintf("cannot read %s: %v", a.Path, err), true), nil, nil
	}
	return textResult(string(b), false), nil, nil
}

func environment(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	var lines []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		sum := sha256.Sum256([]byte(v))
		lines = append(lines, k+" sha256:"+hex.EncodeToString(sum[:]))
	}
	sort.Strings(lines)
	wd, _ := os.Getwd()
	lines = append(lines, "cwd "+wd)
	return textResult(strings.Join(lines, "\n"), false), nil, nil
}

func wait(ctx context.Context, req *mcp.CallToolRequest, a waitArgs) (*mcp.CallToolResult, any, error) {
	select {
	case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
		return textResult("waited", false), nil, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}
