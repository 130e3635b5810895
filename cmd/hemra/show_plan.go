package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/hemra-dev/hemra/planner"
)

// showPlanFile renders a plan saved with `hemra plan -out`: the same text
// as plan printed, or with -json the plan's JSON form (docs/plan-json.md).
func (c *ShowCmd) showPlanFile(g *Globals) error {
	path := c.Path
	if _, err := os.Stat(path); err != nil && !filepath.IsAbs(path) {
		path = filepath.Join(g.Dir, path)
	}
	plan, err := planner.ReadPlanFile(path)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(g.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(plan)
	}
	return planner.RenderText(g.Stdout, plan, planner.TextOptions{Color: g.Color})
}
