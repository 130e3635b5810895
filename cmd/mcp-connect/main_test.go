package main

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/internal/sandboxbin"
)

func TestSocketPath(t *testing.T) {
	for _, c := range []struct{ arg, dir, want string }{
		{"files", "", "/hemra/mcp/files.sock"},
		{"files", "/tmp/x", "/tmp/x/files.sock"},
		{"/run/s.sock", "/tmp/x", "/run/s.sock"},
		{"./s.sock", "", "./s.sock"},
	} {
		if got := socketPath(c.arg, c.dir); got != c.want {
			t.Errorf("socketPath(%q, %q) = %q, want %q", c.arg, c.dir, got, c.want)
		}
	}
}

// TestConnectorPipesBothWays runs the connector as hemra builds it: the
// bytes of stdin reach the socket, the socket's reach stdout, and the end
// of stdin ends the session.
func TestConnectorPipesBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the connector")
	}
	b, err := sandboxbin.Get(context.Background(), sandboxbin.MCPConnect, sandboxbin.Host())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			_, _ = c.Write([]byte("echo:" + sc.Text() + "\n"))
		}
	}()
	cmd := exec.Command(b.Path, "echo")
	cmd.Env = []string{"HEMRA_MCP_DIR=" + dir}
	cmd.Stdin = strings.NewReader("{\"a\":1}\n{\"b\":2}\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(out) != "echo:{\"a\":1}\necho:{\"b\":2}\n" {
		t.Fatalf("out = %q", out)
	}

	cmd = exec.Command(b.Path, filepath.Join(dir, "missing.sock"))
	msg, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(msg), "cannot reach MCP server") {
		t.Fatalf("missing socket: %v %s", err, msg)
	}
}
