package main

// ImportCmd is `hemra import`.
type ImportCmd struct {
	Path string `arg:"" optional:"" help:"What to import."`
}

func (c *ImportCmd) Help() string {
	return `Example:

  hemra import ./jobs/2026-11-30`
}

func (c *ImportCmd) Run(g *Globals) error { return errNotImplemented }
