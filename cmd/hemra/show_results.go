package main

// showResults renders attempts and results from the store (owned by the
// executor work).
func (c *ShowCmd) showResults(g *Globals) error { return errNotImplemented }
