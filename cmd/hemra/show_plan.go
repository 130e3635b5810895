package main

// showPlanFile renders a saved plan (owned by the planner work).
func (c *ShowCmd) showPlanFile(g *Globals) error { return errNotImplemented }
