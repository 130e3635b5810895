package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/hemra-dev/hemra/config"
)

// Match modes of the built-in JSONL verifier.
const (
	MatchExact    = "exact"
	MatchIncludes = "includes"
	MatchRegex    = "regex"
	MatchNumeric  = "numeric"
)

// comparison is the built-in verifier of a JSONL task: it compares the
// harness's final output with the task's target.
type comparison struct {
	Match         string
	CaseSensitive bool
	Trim          bool
	Tolerance     float64
}

// comparisonFor reads the verifier block's options. Without a verifier
// block the comparison is an exact, trimmed, case-sensitive match.
func comparisonFor(v *config.Verifier) comparison {
	if v == nil {
		return comparison{Match: MatchExact, CaseSensitive: true, Trim: true}
	}
	c := comparison{Match: v.Match, CaseSensitive: v.CaseSensitive, Trim: v.Trim, Tolerance: v.Tolerance}
	if c.Match == "" {
		c.Match = MatchExact
	}
	return c
}

// jsonText is the text a JSON value compares as: a string's content, or
// the compact JSON of anything else.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// score compares output with target and returns 1 or 0. An error means the
// target itself is unusable (a bad regex, a non-numeric target): a verifier
// error, not a task failure.
func (c comparison) score(output, target json.RawMessage) (float64, error) {
	out, want := jsonText(output), jsonText(target)
	if c.Trim {
		out, want = strings.TrimSpace(out), strings.TrimSpace(want)
	}
	if !c.CaseSensitive && c.Match != MatchRegex {
		out, want = strings.ToLower(out), strings.ToLower(want)
	}
	pass := false
	switch c.Match {
	case MatchExact:
		pass = out == want
	case MatchIncludes:
		pass = strings.Contains(out, want)
	case MatchRegex:
		pattern := want
		if !c.CaseSensitive {
			pattern = "(?i)" + pattern
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return 0, fmt.Errorf("target is not a valid regular expression: %v", err)
		}
		pass = re.MatchString(out)
	case MatchNumeric:
		w, err := strconv.ParseFloat(strings.TrimSpace(want), 64)
		if err != nil {
			return 0, fmt.Errorf("target %s is not a number", firstBytes([]byte(want)))
		}
		o, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			// An answer that is not a number is a wrong answer.
			return 0, nil
		}
		pass = math.Abs(o-w) <= c.Tolerance
	default:
		return 0, fmt.Errorf("unknown match %q (want exact, includes, regex or numeric)", c.Match)
	}
	if pass {
		return 1, nil
	}
	return 0, nil
}
