package main

// PlanCmd is `hemra plan`.
type PlanCmd struct {
	Out string `name:"out" placeholder:"FILE" help:"Save the plan to FILE for hemra apply."`
}

func (c *PlanCmd) Help() string {
	return `Example:

  hemra plan -out=plan.hplan`
}

func (c *PlanCmd) Run(g *Globals) error { return errNotImplemented }
