package planner

import (
	"fmt"
	"path"
	"strings"
)

// MatchAddress reports whether a -target or -replace pattern selects an
// attempt address. A pattern is an address (baseline/agent/hello#2), a
// prefix of one ending at a "/" or "#" boundary (baseline, baseline/agent,
// baseline/agent/hello), or a path.Match glob over the address or one of
// those prefixes ('baseline/agent/*', '*/oracle').
func MatchAddress(pattern, addr string) bool {
	if pattern == addr {
		return true
	}
	if ok, _ := path.Match(pattern, addr); ok {
		return true
	}
	for i := 0; i < len(addr); i++ {
		if addr[i] != '/' && addr[i] != '#' {
			continue
		}
		prefix := addr[:i]
		if prefix == pattern {
			return true
		}
		if ok, _ := path.Match(pattern, prefix); ok {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, addr string) bool {
	for _, p := range patterns {
		if MatchAddress(p, addr) {
			return true
		}
	}
	return false
}

func checkPattern(p string) error {
	if strings.TrimSpace(p) == "" {
		return fmt.Errorf("empty pattern")
	}
	if _, err := path.Match(p, ""); err != nil {
		return err
	}
	return nil
}

// patternNotes says when -target is in effect and when a -target or
// -replace pattern matched nothing.
func (p *planner) patternNotes(plan *Plan) {
	if len(p.opts.Targets) > 0 {
		plan.Notes = append(plan.Notes, "Targeting is in effect: only attempts matching -target were planned; the others may be out of date.")
	}
	for _, set := range []struct {
		flag     string
		patterns []string
	}{{"-target", p.opts.Targets}, {"-replace", p.opts.Replace}} {
		for _, pat := range set.patterns {
			found := false
			for _, a := range plan.Attempts {
				if MatchAddress(pat, a.Address) {
					found = true
					break
				}
			}
			if !found {
				plan.Notes = append(plan.Notes, fmt.Sprintf("%s %s matched no attempt.", set.flag, pat))
			}
		}
	}
}
