package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseSize reads a memory size: plain bytes ("1048576") or a number with a
// binary unit k, m, g or t ("512m", "4g", "1.5g", "1024k"; case-insensitive,
// an optional trailing "b" or "ib" is accepted). "0" means no limit.
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(strings.ToLower(s))
	if in == "" {
		return 0, fmt.Errorf("empty size")
	}
	in = strings.TrimSuffix(in, "b")
	if n := len(in); n >= 2 && in[n-1] == 'i' && strings.IndexByte("kmgt", in[n-2]) >= 0 {
		in = in[:n-1]
	}
	mult := float64(1)
	if n := len(in); n > 0 {
		switch in[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			in = in[:n-1]
		}
	}
	if in == "" || strings.ContainsAny(in, "+-eExX_") {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	f, err := strconv.ParseFloat(in, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

// ParseDuration reads a positive duration in Go's syntax: "90s", "15m",
// "1h30m". A number without a unit is refused, because seconds and
// minutes are both plausible readings.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return 0, fmt.Errorf("%q has no unit: write %ss or %sm", s, s, s)
		}
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// versionConstraint is one "OP X.Y.Z" term of hemra.required_version.
type versionConstraint struct {
	op  string
	ver [3]int
	n   int // how many version parts were written (for ~>)
}

// parseVersionConstraints reads a Terraform-style constraint list such as
// ">= 0.1.0, < 1.0.0" or "~> 0.2".
func parseVersionConstraints(s string) ([]versionConstraint, error) {
	var out []versionConstraint
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			return nil, fmt.Errorf("empty constraint in %q", s)
		}
		op := "="
		for _, o := range []string{">=", "<=", "!=", "~>", ">", "<", "="} {
			if strings.HasPrefix(term, o) {
				op, term = o, strings.TrimSpace(term[len(o):])
				break
			}
		}
		v, n, err := parseVersion(term)
		if err != nil {
			return nil, err
		}
		out = append(out, versionConstraint{op: op, ver: v, n: n})
	}
	return out, nil
}

// parseVersion reads "1", "1.2" or "1.2.3" (a "v" prefix and a
// pre-release or build suffix are ignored).
func parseVersion(s string) (v [3]int, n int, err error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 || s == "" {
		return v, 0, fmt.Errorf("%q is not a version like 1.2.3", s)
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return v, 0, fmt.Errorf("%q is not a version like 1.2.3", s)
		}
		v[i] = x
	}
	return v, len(parts), nil
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// versionAllowed reports whether v meets every constraint. Pre-release
// suffixes of v are ignored, so a development build of 0.1.0 meets
// ">= 0.1.0".
func versionAllowed(v [3]int, cs []versionConstraint) bool {
	for _, c := range cs {
		cmp := compareVersions(v, c.ver)
		ok := false
		switch c.op {
		case "=":
			ok = cmp == 0
		case "!=":
			ok = cmp != 0
		case ">":
			ok = cmp > 0
		case ">=":
			ok = cmp >= 0
		case "<":
			ok = cmp < 0
		case "<=":
			ok = cmp <= 0
		case "~>":
			// "~> 1.2" allows 1.x from 1.2; "~> 1.2.3" allows 1.2.x from 1.2.3.
			upper := c.ver
			if c.n <= 1 {
				ok = cmp >= 0
				break
			}
			upper[c.n-2]++
			for i := c.n - 1; i < 3; i++ {
				upper[i] = 0
			}
			ok = cmp >= 0 && compareVersions(v, upper) < 0
		}
		if !ok {
			return false
		}
	}
	return true
}
