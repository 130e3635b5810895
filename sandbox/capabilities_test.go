package sandbox_test

import (
	"reflect"
	"testing"

	"github.com/hemra-dev/hemra/sandbox"
)

func has(caps []sandbox.Capability, c sandbox.Capability) bool {
	for _, x := range caps {
		if x == c {
			return true
		}
	}
	return false
}

func TestDockerCapabilitiesFollowSettings(t *testing.T) {
	full := sandbox.Settings{Kind: "docker", Network: "none", Memory: 1 << 30, CPUs: 1, Pids: 100}
	caps := sandbox.CapabilitiesFor(full)
	for _, c := range []sandbox.Capability{sandbox.NetworkBlock, sandbox.ResourceLimit, sandbox.FilesystemMount, sandbox.CustomImage, sandbox.LinuxContainer, sandbox.StreamStdio, sandbox.StreamLogs, sandbox.GracefulCancel} {
		if !has(caps, c) {
			t.Errorf("hardened docker lacks %s: %v", c, caps)
		}
	}
	if has(caps, sandbox.LinuxVM) || has(caps, sandbox.EgressAllowlist) {
		t.Errorf("docker claims a VM or an egress allowlist: %v", caps)
	}

	open := full
	open.Network = "bridge"
	if has(sandbox.CapabilitiesFor(open), sandbox.NetworkBlock) {
		t.Errorf("network = bridge still offers network_block")
	}
	for _, loosen := range []func(*sandbox.Settings){
		func(s *sandbox.Settings) { s.Memory = 0 },
		func(s *sandbox.Settings) { s.CPUs = 0 },
		func(s *sandbox.Settings) { s.Pids = 0 },
	} {
		s := full
		loosen(&s)
		if has(sandbox.CapabilitiesFor(s), sandbox.ResourceLimit) {
			t.Errorf("resource_limit offered without every limit: %+v", s)
		}
		if len(sandbox.Loosenings(s)) == 0 {
			t.Errorf("no loosening recorded for %+v", s)
		}
	}
	if l := sandbox.Loosenings(full); len(l) != 0 {
		t.Errorf("hardened settings report loosenings: %v", l)
	}
}

func TestDefaultsMakeDockerHardened(t *testing.T) {
	s := sandbox.WithDefaults(sandbox.Settings{}, nil)
	if !has(sandbox.CapabilitiesFor(s), sandbox.ResourceLimit) || !has(sandbox.CapabilitiesFor(s), sandbox.NetworkBlock) {
		t.Errorf("the default docker sandbox is not hardened: %+v", s)
	}
	// An explicit memory = "0" stays a loosening.
	s = sandbox.WithDefaults(sandbox.Settings{Kind: "docker"}, map[string]bool{"memory": true})
	if s.Memory != 0 || has(sandbox.CapabilitiesFor(s), sandbox.ResourceLimit) {
		t.Errorf("explicit memory 0 was replaced by a default: %+v", s)
	}
}

func TestLocalOffersNothing(t *testing.T) {
	if caps := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "local"}); len(caps) != 0 {
		t.Errorf("local offers %v", caps)
	}
	if len(sandbox.Loosenings(sandbox.Settings{Kind: "local"})) == 0 {
		t.Errorf("local does not say it isolates nothing")
	}
}

func TestManagedSandboxes(t *testing.T) {
	fly := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "fly", Network: "open", Memory: 1, CPUs: 1})
	if has(fly, sandbox.NetworkBlock) || !has(fly, sandbox.LinuxVM) || !has(fly, sandbox.ResourceLimit) {
		t.Errorf("fly: %v", fly)
	}
	sprites := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "sprites"})
	if !has(sprites, sandbox.NetworkBlock) || has(sprites, sandbox.CustomImage) {
		t.Errorf("sprites default: %v", sprites)
	}
	egress := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "sprites", Egress: []string{"github.com"}})
	if !has(egress, sandbox.EgressAllowlist) || has(egress, sandbox.NetworkBlock) {
		t.Errorf("sprites with egress: %v", egress)
	}
	modal := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "modal"})
	if !has(modal, sandbox.NetworkBlock) || !has(modal, sandbox.LinuxContainer) {
		t.Errorf("modal: %v", modal)
	}
	if has(sandbox.CapabilitiesFor(sandbox.Settings{Kind: "modal", Network: "open"}), sandbox.NetworkBlock) {
		t.Errorf("modal with network open still blocks")
	}
}

func TestCapabilitiesInDocumentationOrder(t *testing.T) {
	caps := sandbox.CapabilitiesFor(sandbox.Settings{Kind: "docker", Memory: 1, CPUs: 1, Pids: 1})
	want := []sandbox.Capability{sandbox.NetworkBlock, sandbox.ResourceLimit, sandbox.FilesystemMount, sandbox.CustomImage, sandbox.LinuxContainer, sandbox.StreamStdio, sandbox.StreamLogs, sandbox.GracefulCancel}
	if !reflect.DeepEqual(caps, want) {
		t.Errorf("got %v, want %v", caps, want)
	}
}
