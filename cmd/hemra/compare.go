package main

// CompareCmd is `hemra compare`.
type CompareCmd struct {
	Left string `arg:"" optional:"" help:"First eval or run."`
}

func (c *CompareCmd) Help() string {
	return `Example:

  hemra compare baseline candidate`
}

func (c *CompareCmd) Run(g *Globals) error { return errNotImplemented }
