package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// DefaultListen is where `hemra serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:7878"

// CheckListen refuses an address that is not loopback unless expose is
// set. "host:port" with a host that is an IP, "localhost", or a name that
// resolves only to loopback addresses is loopback; an empty host (every
// interface) is not.
func CheckListen(addr string, expose bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-listen %q: want HOST:PORT, such as %s: %v", addr, DefaultListen, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("-listen %q: port %q: %v", addr, port, err)
	}
	if expose {
		return nil
	}
	if host == "" {
		return fmt.Errorf("-listen %q listens on every interface: anyone who reaches this machine could read the whole store. Listen on 127.0.0.1, or add --expose (which then requires the access token it prints)", addr)
	}
	loop, err := IsLoopback(host)
	if err != nil {
		return fmt.Errorf("-listen %q: %v", addr, err)
	}
	if !loop {
		return fmt.Errorf("-listen %q is not a loopback address: anyone who reaches it could read the whole store. Listen on 127.0.0.1, or add --expose (which then requires the access token it prints)", addr)
	}
	return nil
}

// IsLoopback reports whether host (an IP or a name) is loopback: an IP in
// 127.0.0.0/8 or ::1, "localhost", or a name whose every address is.
func IsLoopback(host string) (bool, error) {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback(), nil
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false, fmt.Errorf("resolving %q: %v", host, err)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

// NewToken is a random access token: 32 bytes from crypto/rand, URL-safe.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on a broken source)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loopbackHost reports whether a request's Host header names this machine
// by a loopback name or address: a page of another site that a DNS
// rebinding points at 127.0.0.1 sends its own name, and is refused.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback()
	}
	return strings.EqualFold(host, "localhost")
}
