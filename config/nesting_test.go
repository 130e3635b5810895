package config

import (
	"strings"
	"testing"
)

// TestDeepNestingRefused: HCL nested 100,000 levels deep (brackets,
// parentheses, objects, calls, templates, blocks) is refused with a
// diagnostic at the place, before HCL's parser, which recurses per level,
// could exhaust the stack; so is a -var value. MaxNesting levels are fine.
func TestDeepNestingRefused(t *testing.T) {
	const n = 100000
	deep := map[string]string{
		"brackets":    strings.Repeat("[", n) + strings.Repeat("]", n),
		"parentheses": strings.Repeat("(", n) + "1" + strings.Repeat(")", n),
		"objects":     strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n),
		"calls":       strings.Repeat("max(", n) + "1" + strings.Repeat(")", n),
		"templates":   `"` + strings.Repeat(`${"`, n) + "x" + strings.Repeat(`"}`, n) + `"`,
	}
	for name, expr := range deep {
		dir := writeFiles(t, map[string]string{"main.hcl": "locals {\n  x = " + expr + "\n}\n"})
		_, diags := Load(dir, LoadOptions{SkipTasks: true})
		if !diags.HasErrors() || diags[0].Summary != "Nesting too deep" || diags[0].Subject == nil || diags[0].Subject.Start.Line != 2 {
			t.Errorf("%s: diagnostics %v, want one Nesting too deep at line 2", name, diags)
		}
	}
	blocks := strings.Repeat("a {\n", n) + strings.Repeat("}\n", n)
	if _, diags := Load(writeFiles(t, map[string]string{"main.hcl": blocks}), LoadOptions{SkipTasks: true}); !diags.HasErrors() || diags[0].Summary != "Nesting too deep" {
		t.Errorf("nested blocks: %v", diags)
	}

	dir := writeFiles(t, map[string]string{"main.hcl": "variable \"x\" {\n  type = list(any)\n}\n"})
	_, diags := Load(dir, LoadOptions{SkipTasks: true, Vars: []string{"x=" + deep["brackets"]}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Nesting too deep") {
		t.Errorf("-var: %v", diags)
	}

	ok := strings.Repeat("[", MaxNesting-2) + strings.Repeat("]", MaxNesting-2)
	dir = writeFiles(t, map[string]string{"main.hcl": "locals {\n  x = " + ok + "\n}\n"})
	if _, diags := Load(dir, LoadOptions{SkipTasks: true}); diags.HasErrors() {
		t.Errorf("%d levels: %v", MaxNesting-2, diags)
	}
	// Brackets inside strings and comments are not nesting.
	dir = writeFiles(t, map[string]string{"main.hcl": "# " + strings.Repeat("[", 1000) + "\nlocals {\n  x = \"" + strings.Repeat("[", 1000) + "\"\n}\n"})
	if _, diags := Load(dir, LoadOptions{SkipTasks: true}); diags.HasErrors() {
		t.Errorf("brackets in a string and a comment: %v", diags)
	}
}
