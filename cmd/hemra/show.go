package main

// ShowCmd is `hemra show`.
type ShowCmd struct {
	Path string `arg:"" optional:"" help:"A saved plan file or an attempt address."`
}

func (c *ShowCmd) Help() string {
	return `Example:

  hemra show plan.hplan`
}

func (c *ShowCmd) Run(g *Globals) error { return errNotImplemented }
