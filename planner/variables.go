package planner

import (
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/hemra-dev/hemra/config"
)

// planVariables records the variables' values for the plan: every
// non-sensitive one by value, every sensitive one by name only.
func planVariables(cfg *config.Config) map[string]PlanVariable {
	if len(cfg.Variables) == 0 {
		return nil
	}
	out := make(map[string]PlanVariable, len(cfg.Variables))
	for name, v := range cfg.Variables {
		if v.Sensitive {
			out[name] = PlanVariable{Sensitive: true}
			continue
		}
		val, _ := v.Value.UnmarkDeep()
		if !val.IsWhollyKnown() {
			continue
		}
		typ, err := ctyjson.MarshalType(val.Type())
		if err != nil {
			continue
		}
		js, err := ctyjson.Marshal(val, val.Type())
		if err != nil {
			continue
		}
		out[name] = PlanVariable{Value: js, Type: typ}
	}
	return out
}

// SavedVariables are the non-sensitive variable values a saved plan was
// made with, for config.LoadOptions.Saved; and the names of its sensitive
// variables, whose values must come again from the environment, a
// variables file or -var.
func (p *Plan) SavedVariables() (values map[string]cty.Value, sensitive []string, err error) {
	values = map[string]cty.Value{}
	for name, v := range p.Variables {
		if v.Sensitive {
			sensitive = append(sensitive, name)
			continue
		}
		typ, err := ctyjson.UnmarshalType(v.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %q in the plan: %v", name, err)
		}
		val, err := ctyjson.Unmarshal(v.Value, typ)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %q in the plan: %v", name, err)
		}
		values[name] = val
	}
	sort.Strings(sensitive)
	return values, sensitive, nil
}
