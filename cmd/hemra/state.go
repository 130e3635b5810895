package main

// StateCmd groups `hemra state` subcommands.
type StateCmd struct {
	List StateListCmd `cmd:"" help:"List attempt addresses in the state, optionally matching a glob."`
	Show StateShowCmd `cmd:"" help:"Show one attempt's record and manifest."`
}

// StateListCmd is `hemra state list`.
type StateListCmd struct {
	Glob string `arg:"" optional:"" help:"Address glob, e.g. 'baseline/agent/*'."`
}

func (c *StateListCmd) Help() string { return "Example:\n\n  hemra state list 'baseline/*'" }

func (c *StateListCmd) Run(g *Globals) error { return errNotImplemented }

// StateShowCmd is `hemra state show`.
type StateShowCmd struct {
	Address string `arg:"" help:"Attempt address, e.g. baseline/agent/hello-world#1."`
}

func (c *StateShowCmd) Help() string { return "Example:\n\n  hemra state show baseline/agent/hello-world#1" }

func (c *StateShowCmd) Run(g *Globals) error { return errNotImplemented }
