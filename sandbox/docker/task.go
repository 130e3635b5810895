package docker

import (
	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/sandbox"
)

// TaskSettings narrows the operator's settings s by a Harbor task's
// task.toml: cpus and memory_mb lower the limits (never raise them past
// the operator's), allow_internet = false closes the network and
// allow_internet = true opens nothing the operator did not, and the
// task's workdir is used. Image and Build are left to the caller.
func TaskSettings(s sandbox.Settings, t *dataset.Task) sandbox.Settings {
	if t == nil || t.Config == nil {
		return s
	}
	env := t.Config.Environment
	if env.CPUs > 0 && (s.CPUs <= 0 || env.CPUs < s.CPUs) {
		s.CPUs = env.CPUs
	}
	if mem := env.MemoryMB << 20; env.MemoryMB > 0 && (s.Memory <= 0 || mem < s.Memory) {
		s.Memory = mem
	}
	if env.AllowInternet != nil && !*env.AllowInternet {
		s.Network = "none"
	}
	if env.Workdir != "" {
		s.Workdir = env.Workdir
	}
	return s
}
