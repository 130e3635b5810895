package main

import (
	"fmt"
	"runtime"
)

// VersionCmd is `hemra version`.
type VersionCmd struct{}

func (c *VersionCmd) Help() string { return "Example:\n\n  hemra version" }

func (c *VersionCmd) Run(g *Globals) error {
	fmt.Fprintf(g.Stdout, "hemra v%s (%s %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
