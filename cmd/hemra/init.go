package main

// InitCmd is `hemra init`.
type InitCmd struct {
	Upgrade bool `name:"upgrade" help:"Re-resolve every image and dataset, ignoring the lock file."`
}

func (c *InitCmd) Help() string {
	return `Example:

  hemra init -upgrade`
}

func (c *InitCmd) Run(g *Globals) error { return errNotImplemented }
