// Package deps pins the modules hemra is built on while the packages that
// use them are being written, so that go.mod stays stable. Remove an import
// here once a real package imports the module.
package deps

import (
	_ "github.com/docker/docker/client"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/hashicorp/hcl/v2/ext/tryfunc"
	_ "github.com/hashicorp/hcl/v2/ext/typeexpr"
	_ "github.com/hashicorp/hcl/v2/hclwrite"
	_ "github.com/hexops/gotextdiff"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/zclconf/go-cty/cty/function/stdlib"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/term"
)
