package main

// ValidateCmd is `hemra validate`.
type ValidateCmd struct {
	JSON bool `name:"json" help:"Print diagnostics as JSON."`
}

func (c *ValidateCmd) Help() string {
	return `Example:

  hemra validate -chdir examples/quickstart`
}

func (c *ValidateCmd) Run(g *Globals) error { return errNotImplemented }
