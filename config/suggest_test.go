package config

import (
	"strings"
	"testing"
)

// TestSuggestionDeterministic: "did you mean" names the same block every
// time, whatever order the declared names come in (a map's), and the one
// nearest in length among those as near.
func TestSuggestionDeterministic(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.hcl": `
harness "nop" {
  builtin = "nop"
}
harness "nop2" {
  builtin = "nop"
}
harness "nop4" {
  builtin = "nop"
}
dataset "d" {
  source = "./tasks"
}
eval "e" {
  dataset   = dataset.d
  harnesses = [harness.nop3]
}
`})
	seen := map[string]int{}
	for range 30 {
		_, diags := Load(dir, LoadOptions{SkipTasks: true})
		for _, d := range diags {
			if d.Summary == "Reference to undeclared harness" {
				seen[d.Detail]++
			}
		}
	}
	if len(seen) != 1 {
		t.Fatalf("30 loads gave %d different suggestions: %v", len(seen), seen)
	}
	for detail := range seen {
		if !strings.Contains(detail, `Did you mean "nop2"?`) {
			t.Errorf("suggestion %q, want nop2 (as near as nop4, the same length, first in order)", detail)
		}
	}
}
