package dataset

import "testing"

// A JSONL id may hold "/": the default include "*" must still select it.
func TestSelectTaskNamesWithSlash(t *testing.T) {
	tasks := []*Task{{Name: "HumanEval/0"}, {Name: "HumanEval/1"}, {Name: "MBPP/7"}, {Name: "plain"}}
	names := func(ts []*Task) (out []string) {
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	if got := names(Select(tasks, []string{"*"}, nil)); len(got) != 4 {
		t.Fatalf(`include ["*"] selected %v, want all four`, got)
	}
	if got := names(Select(tasks, []string{"HumanEval/*"}, []string{"*/1"})); len(got) != 1 || got[0] != "HumanEval/0" {
		t.Fatalf(`include ["HumanEval/*"] exclude ["*/1"] selected %v, want [HumanEval/0]`, got)
	}
}
