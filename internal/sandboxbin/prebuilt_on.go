//go:build hemra_prebuilt

package sandboxbin

import (
	"embed"
	"io/fs"
)

// `make build` runs ./internal/sandboxbin/prebuild into prebuilt/ first,
// then builds hemra with -tags hemra_prebuilt: the binaries travel inside
// hemra, and a machine without Go can still start sandboxes that need them.
//
//go:embed prebuilt
var prebuiltFiles embed.FS

func init() {
	sub, err := fs.Sub(prebuiltFiles, "prebuilt")
	if err == nil {
		prebuilt = sub
	}
}
