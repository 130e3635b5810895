package main

// ServeCmd is `hemra serve`.
type ServeCmd struct {
	Listen string `name:"listen" default:"127.0.0.1:7878" help:"Address to listen on (loopback only unless -expose)."`
}

func (c *ServeCmd) Help() string {
	return `Example:

  hemra serve -listen 127.0.0.1:7878`
}

func (c *ServeCmd) Run(g *Globals) error { return errNotImplemented }
