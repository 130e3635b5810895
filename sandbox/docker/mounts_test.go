package docker_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/internal/sandboxbin"
	"github.com/hemra-dev/hemra/sandbox"
)

// TestSpecMountsReachAHostSocket binds a private host folder holding a Unix
// socket, and hemra's connector, into a container without network: the
// container reaches the host service through the socket only, and can
// write to neither mount. This is how host services (the MCP relay, a
// model gateway) are handed to a sandbox.
func TestSpecMountsReachAHostSocket(t *testing.T) {
	_, p, ref := engine(t)
	bin, err := sandboxbin.Get(context.Background(), sandboxbin.MCPConnect, sandboxbin.Linux())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hemra-sock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					_, _ = c.Write([]byte("host:" + sc.Text() + "\n"))
				}
			}()
		}
	}()
	in := start(t, p, sandbox.Spec{
		Settings: sandbox.Settings{Image: ref, Network: "none"},
		Mounts: []sandbox.Mount{
			{Source: dir, Target: "/hemra/mcp"},
			{Source: bin.Path, Target: "/hemra/bin/mcp-connect"},
		},
	})
	r := run(t, in, sandbox.ExecRequest{Command: []string{"/hemra/bin/mcp-connect", "echo"}, Stdin: true}, "ping\n")
	if r.code != 0 || r.stdout != "host:ping\n" {
		t.Fatalf("through the socket: %+v", r)
	}
	r = run(t, in, sandbox.ExecRequest{Command: []string{"sh", "-c", "touch /hemra/mcp/x; echo > /hemra/bin/mcp-connect; ls /hemra/mcp; echo links; ls /sys/class/net"}}, "")
	if !strings.Contains(r.stderr, "Read-only file system") || strings.Contains(r.stdout, "x\n") || !strings.HasPrefix(r.stdout, "echo.sock\n") {
		t.Fatalf("mounts are not read-only: %+v", r)
	}
	if _, links, _ := strings.Cut(r.stdout, "links\n"); links != "lo\n" {
		t.Fatalf("network links %q, want only lo", links)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("the container wrote into the socket folder")
	}
}
