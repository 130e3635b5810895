package main

// DoctorCmd is `hemra doctor`.
type DoctorCmd struct {
	JSON bool `name:"json" help:"Print JSON."`
}

func (c *DoctorCmd) Help() string {
	return `Example:

  hemra doctor -json`
}

func (c *DoctorCmd) Run(g *Globals) error { return errNotImplemented }
