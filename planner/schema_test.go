package planner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hemra-dev/hemra/planner"
)

// planSchema compiles docs/plan.schema.json.
func planSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(filepath.Join("..", "docs", "plan.schema.json"))
	if err != nil {
		t.Fatalf("compiling docs/plan.schema.json: %v", err)
	}
	return sch
}

func validatePlanJSON(t testing.TB, sch *jsonschema.Schema, name string, data []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s does not match docs/plan.schema.json:\n%v", name, err)
	}
}

// TestPlanSchemaValidatesGoldens checks every golden JSON plan against
// the schema in docs/: a key the planner writes that the schema does not
// declare fails here.
func TestPlanSchemaValidatesGoldens(t *testing.T) {
	sch := planSchema(t)
	files, _ := filepath.Glob("testdata/*/plan*.json")
	if len(files) < 10 {
		t.Fatalf("only %d golden plans", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		validatePlanJSON(t, sch, f, data)
	}
	if t.Failed() {
		t.Log("update docs/plan.schema.json (and docs/plan-json.md) with the new keys")
	}
}

// TestPlanSchemaRefuses makes sure the schema is not one that accepts
// anything.
func TestPlanSchemaRefuses(t *testing.T) {
	sch := planSchema(t)
	data, err := os.ReadFile("testdata/test_sh_edited/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	json.Unmarshal(data, &p)
	for name, edit := range map[string]func(map[string]any){
		"an unknown key":    func(p map[string]any) { p["surprise"] = 1 },
		"an unknown action": func(p map[string]any) { p["attempts"].([]any)[0].(map[string]any)["action"] = "destroy" },
		"no summary":        func(p map[string]any) { delete(p, "summary") },
		"a bad cause kind":  func(p map[string]any) { p["causes"].([]any)[0].(map[string]any)["kind"] = "vibes" },
		"a bad isolation":   func(p map[string]any) { p["isolation"].([]any)[0].(map[string]any)["memory"] = "2g" },
	} {
		var copyOf map[string]any
		json.Unmarshal(data, &copyOf)
		edit(copyOf)
		bad, _ := json.Marshal(copyOf)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
		if err := sch.Validate(inst); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if !strings.HasPrefix(planner.FormatVersion, "1.") {
		t.Errorf("the schema describes format 1.x, the planner writes %s", planner.FormatVersion)
	}
}
