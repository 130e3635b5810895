// Command mcp-connect is the MCP connector hemra mounts read-only into a
// sandbox at /hemra/bin/mcp-connect. It speaks MCP's stdio transport on
// its stdin and stdout and forwards every byte, unchanged, to the Unix
// socket of an MCP server that hemra runs and relays for the attempt, so
// any MCP client works unchanged inside the sandbox:
//
//	mcp-connect NAME          # the server NAME: $HEMRA_MCP_DIR/NAME.sock, else /hemra/mcp/NAME.sock
//	mcp-connect /path/x.sock  # a socket path (an argument with a slash)
//
// It is a pipe, nothing more: no parsing, no buffering beyond one read.
// It exits 0 when the relay closes the connection (the client or the
// server is done) and 1, with one line on stderr, when it cannot connect.
// It uses only the standard library so that hemra can build it statically
// from its own embedded sources (internal/sandboxbin).
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is where a container sandbox mounts the sockets.
const DefaultDir = "/hemra/mcp"

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: mcp-connect NAME | mcp-connect /path/to/server.sock")
		fmt.Fprintln(os.Stderr, "Connects stdin and stdout to an MCP server hemra runs for this attempt.")
		os.Exit(2)
	}
	path := socketPath(os.Args[1], os.Getenv("HEMRA_MCP_DIR"))
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcp-connect: cannot reach MCP server %q at %s: %v\n", os.Args[1], path, err)
		os.Exit(1)
	}
	go func() {
		// The client's end of input is the end of the session's requests:
		// the relay sees EOF and closes once it has answered.
		_, _ = io.Copy(conn, os.Stdin)
		_ = conn.CloseWrite()
	}()
	if _, err := io.Copy(os.Stdout, conn); err != nil {
		fmt.Fprintf(os.Stderr, "mcp-connect: %s: %v\n", path, err)
		os.Exit(1)
	}
}

// socketPath is the socket of a server name, or the argument itself when
// it is a path.
func socketPath(arg, dir string) string {
	if strings.Contains(arg, "/") {
		return arg
	}
	if dir == "" {
		dir = DefaultDir
	}
	return filepath.Join(dir, arg+".sock")
}
