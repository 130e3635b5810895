package docker

import (
	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/sandbox"
)

// TaskSettings narrows the operator's settings by a Harbor task's
// task.toml (see sandbox.ForTask): limits only ever go down and the
// network only ever closes.
func TaskSettings(s sandbox.Settings, t *dataset.Task) sandbox.Settings {
	s.Kind = Kind
	return sandbox.ForTask(s, t)
}
