// Package hostsock makes the Unix sockets through which hemra hands a host
// service (the model gateway, the MCP relay) to one sandbox instance: each
// socket alone in a private folder that only the operator can enter, so
// that the folder, not the socket, is what a container mounts.
package hostsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// maxPath is below the 108-byte sun_path of Linux (104 on the BSDs).
const maxPath = 100

// Socket is a listening Unix socket in a private folder.
type Socket struct {
	net.Listener
	// Dir is the folder (mode 0700) holding only the socket: mount this.
	Dir string
	// Path is the socket, Dir/<service>.sock (mode 0600).
	Path string
}

// Listen creates a private folder under the system's temporary folder
// (or /tmp when that path is too long for a socket) and listens on
// <service>.sock inside it.
func Listen(service string) (*Socket, error) {
	base := os.TempDir()
	if len(filepath.Join(base, "hemra-"+service+"-0123456789", service+".sock")) > maxPath {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "hemra-"+service+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s socket's folder: %w", service, err)
	}
	// MkdirTemp makes it 0700 already; say so whatever the umask.
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	path := filepath.Join(dir, service+".sock")
	if len(path) > maxPath {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the %s socket's path %s is too long for a Unix socket", service, path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Socket{Listener: l, Dir: dir, Path: path}, nil
}

// Close stops listening and removes the socket and its folder.
func (s *Socket) Close() error {
	err := s.Listener.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if rerr := os.RemoveAll(s.Dir); err == nil {
		err = rerr
	}
	return err
}
