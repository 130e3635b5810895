package main

// FmtCmd is `hemra fmt`.
type FmtCmd struct {
	Check bool `name:"check" help:"Check only; exit 3 when a file would change."`
}

func (c *FmtCmd) Help() string {
	return `Example:

  hemra fmt -check -diff -recursive`
}

func (c *FmtCmd) Run(g *Globals) error { return errNotImplemented }
