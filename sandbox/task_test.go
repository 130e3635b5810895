package sandbox

import (
	"testing"

	"github.com/hemra-dev/hemra/dataset"
)

func TestForTaskOnlyTightens(t *testing.T) {
	yes, no := true, false
	op := Settings{Kind: "docker", Network: "bridge", Memory: 1 << 30, CPUs: 2, Pids: 100}
	for _, tc := range []struct {
		name string
		env  dataset.EnvConfig
		want Settings
	}{
		{"lower limits win", dataset.EnvConfig{CPUs: 1, MemoryMB: 256}, Settings{Kind: "docker", Network: "bridge", Memory: 256 << 20, CPUs: 1, Pids: 100}},
		{"higher limits do not", dataset.EnvConfig{CPUs: 8, MemoryMB: 8192}, op},
		{"allow_internet=false closes", dataset.EnvConfig{AllowInternet: &no}, Settings{Kind: "docker", Network: "none", Memory: 1 << 30, CPUs: 2, Pids: 100}},
		{"allow_internet=true opens nothing", dataset.EnvConfig{AllowInternet: &yes}, op},
		{"workdir", dataset.EnvConfig{Workdir: "/src"}, Settings{Kind: "docker", Network: "bridge", Memory: 1 << 30, CPUs: 2, Pids: 100, Workdir: "/src"}},
	} {
		got := ForTask(op, &dataset.Task{Config: &dataset.TaskConfig{Environment: tc.env}})
		if got.Network != tc.want.Network || got.Memory != tc.want.Memory || got.CPUs != tc.want.CPUs || got.Pids != tc.want.Pids || got.Workdir != tc.want.Workdir {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	closed := Settings{Kind: "docker", Network: "none"}
	if got := ForTask(closed, &dataset.Task{Config: &dataset.TaskConfig{Environment: dataset.EnvConfig{AllowInternet: &yes}}}); got.Network != "none" {
		t.Errorf("allow_internet=true opened an operator's closed network: %q", got.Network)
	}
	if got := ForTask(Settings{Kind: "local"}, &dataset.Task{Config: &dataset.TaskConfig{Environment: dataset.EnvConfig{CPUs: 1}}}); got.CPUs != 0 {
		t.Errorf("a local sandbox got a CPU limit: %+v", got)
	}
}
