package main

// ApplyCmd is `hemra apply`.
type ApplyCmd struct {
	AutoApprove bool `name:"auto-approve" help:"Do not ask for confirmation."`
}

func (c *ApplyCmd) Help() string {
	return `Example:

  hemra apply -auto-approve`
}

func (c *ApplyCmd) Run(g *Globals) error { return errNotImplemented }
