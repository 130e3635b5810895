package main

// RunsCmd is `hemra runs`.
type RunsCmd struct {
	JSON bool `name:"json" help:"Print JSON."`
}

func (c *RunsCmd) Help() string {
	return `Example:

  hemra runs`
}

func (c *RunsCmd) Run(g *Globals) error { return errNotImplemented }
