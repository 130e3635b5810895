package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// A saved plan is a file anyone can edit: decompress, change the JSON,
// compress again. `hemra apply PLANFILE` therefore never trusts what the
// file says it will do. It plans again, from the same configuration, state,
// lock file, variables and -target/-replace/-require as the saved plan, and
// applies only when the two plans are the same attempt for attempt; it then
// runs the plan it computed itself. Same proves the file is the plan this
// configuration and state produce, and names what differs when it is not.

// ErrPlanMismatch is wrapped by the error Same returns.
var ErrPlanMismatch = errors.New("the saved plan is not the plan this configuration and state produce")

// MismatchError lists how a saved plan differs from the plan made again.
type MismatchError struct {
	// Differences each name an attempt (or the plan) and what differs.
	Differences []string
	// Total counts every difference, also those beyond the ones listed.
	Total int
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString("The saved plan is not the plan this configuration and state produce, so it cannot be applied:")
	for _, d := range e.Differences {
		b.WriteString("\n  - ")
		b.WriteString(d)
	}
	if more := e.Total - len(e.Differences); more > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more differences", more)
	}
	b.WriteString("\nThe file was changed after hemra plan wrote it, or was made from other inputs.")
	b.WriteString("\nRun `hemra plan -out FILE` again, review it, and apply the new plan.")
	return b.String()
}

func (e *MismatchError) Unwrap() error { return ErrPlanMismatch }

// maxDifferences bounds how many differences Same lists.
const maxDifferences = 20

// Same returns nil when saved is the plan fresh is, attempt for attempt
// (address, action, changes, prior attempt, the whole manifest; not the
// reasons, explanatory text that recording an interrupted attempt
// rewords)
// and in what the plan as a whole promises (state lineage and serial,
// config and lock hashes, images, targets, replace, require, variables,
// summary, hemra version). Otherwise a *MismatchError names each
// difference. Plan-level remarks (Notes, RunningApply) are not compared.
func Same(saved, fresh *Plan) error {
	d := &differ{}
	d.plan(saved, fresh)
	if d.total == 0 {
		return nil
	}
	return &MismatchError{Differences: d.list, Total: d.total}
}

type differ struct {
	list  []string
	total int
}

func (d *differ) add(format string, args ...any) {
	d.total++
	if len(d.list) < maxDifferences {
		d.list = append(d.list, fmt.Sprintf(format, args...))
	}
}

func (d *differ) plan(saved, fresh *Plan) {
	field := func(name string, s, f any) {
		sj, _ := json.Marshal(s)
		fj, _ := json.Marshal(f)
		if string(sj) == "null" || string(sj) == "[]" || string(sj) == "{}" {
			sj = nil
		}
		if string(fj) == "null" || string(fj) == "[]" || string(fj) == "{}" {
			fj = nil
		}
		if string(sj) != string(fj) {
			d.add("%s: the plan says %s, this configuration and state give %s", name, shortJSON(sj), shortJSON(fj))
		}
	}
	field("hemra_version", saved.HemraVersion, fresh.HemraVersion)
	field("state_lineage", saved.StateLineage, fresh.StateLineage)
	field("state_serial", saved.StateSerial, fresh.StateSerial)
	field("config_hash", saved.ConfigHash, fresh.ConfigHash)
	field("lock_hash", saved.LockHash, fresh.LockHash)
	field("targets", saved.Targets, fresh.Targets)
	field("replace", saved.Replace, fresh.Replace)
	field("require", saved.Require, fresh.Require)
	field("variables", saved.Variables, fresh.Variables)
	field("images", saved.Images, fresh.Images)
	field("summary", saved.Summary, fresh.Summary)

	freshBy := make(map[string]*PlannedAttempt, len(fresh.Attempts))
	for _, a := range fresh.Attempts {
		freshBy[a.Address] = a
	}
	seen := make(map[string]int, len(saved.Attempts))
	for _, a := range saved.Attempts {
		if a == nil {
			d.add("an attempt of the plan is empty (null)")
			continue
		}
		seen[a.Address]++
		if seen[a.Address] == 2 {
			d.add("%s: listed more than once in the plan", a.Address)
		}
		if seen[a.Address] > 1 {
			continue
		}
		f, ok := freshBy[a.Address]
		if !ok {
			d.add("%s: in the plan (%s), but this configuration and state plan no such attempt: it is not declared, or not selected", a.Address, a.Action)
			continue
		}
		d.attempt(a, f)
	}
	for _, f := range fresh.Attempts {
		if seen[f.Address] == 0 {
			d.add("%s: this configuration and state plan it (%s), but the plan does not list it", f.Address, f.Action)
		}
	}
}

// attempt compares one attempt field by field, through its JSON form (the
// form the saved plan holds).
func (d *differ) attempt(saved, fresh *PlannedAttempt) {
	s, f := *saved, *fresh
	s.Reasons, f.Reasons = nil, nil
	sj, err1 := json.Marshal(&s)
	fj, err2 := json.Marshal(&f)
	if err1 == nil && err2 == nil && string(sj) == string(fj) {
		return
	}
	var sv, fv any
	_ = json.Unmarshal(sj, &sv)
	_ = json.Unmarshal(fj, &fv)
	var found []string
	diffJSON("", sv, fv, &found)
	sort.Strings(found)
	if len(found) == 0 {
		found = []string{"its record differs"}
	}
	for _, f := range found {
		d.add("%s: %s", saved.Address, f)
	}
}

// diffJSON lists the paths at which two decoded JSON values differ, with
// both values. Lists of objects keyed by "path" (manifest inputs) or
// "address" are matched by that key, so an inserted input names itself
// rather than shifting every index after it.
func diffJSON(path string, a, b any, out *[]string) {
	if len(*out) >= maxDifferences {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			diffJSON(joinPath(path, k), av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		if key := listKey(av, bv); key != "" {
			am, bm := keyed(av, key), keyed(bv, key)
			names := map[string]bool{}
			for k := range am {
				names[k] = true
			}
			for k := range bm {
				names[k] = true
			}
			sorted := make([]string, 0, len(names))
			for k := range names {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				diffJSON(fmt.Sprintf("%s[%s]", path, k), am[k], bm[k], out)
			}
			if len(av) != len(am) {
				*out = append(*out, fmt.Sprintf("%s: an entry is listed more than once in the plan", path))
			}
			return
		}
		if len(av) != len(bv) {
			break
		}
		for i := range av {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
		return
	}
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	if string(aj) == string(bj) {
		return
	}
	if path == "" {
		path = "the attempt"
	}
	*out = append(*out, fmt.Sprintf("%s: the plan says %s, this configuration and state give %s", path, shortJSON(aj), shortJSON(bj)))
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// listKey is the field that names the objects of both lists, "" when
// they are not lists of objects all named by one.
func listKey(a, b []any) string {
	for _, key := range []string{"path", "address"} {
		ok := len(a)+len(b) > 0
		for _, l := range [][]any{a, b} {
			for _, e := range l {
				m, isMap := e.(map[string]any)
				if !isMap {
					ok = false
					break
				}
				if _, has := m[key].(string); !has {
					ok = false
					break
				}
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

// keyed indexes a list of objects by key; a stage, when there is one,
// joins it (the same path can be an input of two stages).
func keyed(l []any, key string) map[string]any {
	out := make(map[string]any, len(l))
	for _, e := range l {
		m := e.(map[string]any)
		k := m[key].(string)
		if st, ok := m["stage"].(string); ok {
			k = st + " " + k
		}
		out[k] = e
	}
	return out
}

func shortJSON(b []byte) string {
	if b == nil || string(b) == "null" {
		return "nothing"
	}
	const max = 120
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
