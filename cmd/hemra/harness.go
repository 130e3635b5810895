package main

// HarnessCmd groups `hemra harness` subcommands.
type HarnessCmd struct {
	Check HarnessCheckCmd `cmd:"" help:"Run one attempt of a harness on one task in a throwaway workspace, tracing the protocol."`
}

// HarnessCheckCmd is `hemra harness check`.
type HarnessCheckCmd struct {
	Name string `arg:"" help:"Harness name as declared in the eval directory."`
	Task string `name:"task" placeholder:"DIR" help:"Task directory to run (default: the first task of the first eval using the harness)."`
}

func (c *HarnessCheckCmd) Help() string {
	return "Example:\n\n  hemra harness check agent -task tasks/hello-world"
}

func (c *HarnessCheckCmd) Run(g *Globals) error { return errNotImplemented }
