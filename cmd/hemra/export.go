package main

// ExportCmd is `hemra export`.
type ExportCmd struct {
	Target string `arg:"" optional:"" help:"A run id or an attempt address."`
}

func (c *ExportCmd) Help() string {
	return `Example:

  hemra export -out ./export baseline/agent/hello-world#1`
}

func (c *ExportCmd) Run(g *Globals) error { return errNotImplemented }
