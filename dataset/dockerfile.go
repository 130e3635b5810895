package dataset

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// DockerFrom is one base image of a Dockerfile: a FROM line's reference
// with the build arguments it uses expanded to their ARG defaults.
type DockerFrom struct {
	Ref  string // expanded ("ubuntu:24.04"); "" when it cannot be (Err)
	Raw  string // as written ("${BASE}")
	Line int    // 1-based line of the FROM instruction
	Col  int    // 1-based column of Raw on that line
	// Err says why Raw cannot be pinned: a build argument without a
	// default, which only a build could supply.
	Err string
}

// DockerfileFroms lists the base images of a Dockerfile in order, leaving
// out `scratch` and earlier build stages. A FROM that uses a build
// argument declared before the first FROM (`ARG BASE=ubuntu:24.04`,
// `FROM ${BASE}`) is expanded to the argument's default, as `docker build`
// without --build-arg does, so it can be pinned like any other base.
func DockerfileFroms(df []byte) []DockerFrom {
	var out []DockerFrom
	args := map[string]string{}
	declared := map[string]bool{}
	stages := map[string]bool{}
	seenFrom := false
	for _, ins := range dockerInstructions(df) {
		f := strings.Fields(ins.text)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "ARG":
			if seenFrom {
				continue // a stage's own ARGs do not reach FROM lines
			}
			for _, a := range f[1:] {
				name, val, hasVal := strings.Cut(a, "=")
				declared[name] = true
				if hasVal {
					args[name] = strings.Trim(val, `"'`)
				}
			}
		case "FROM":
			seenFrom = true
			rest := f[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				continue
			}
			raw := rest[0]
			ref, err := expandArgs(raw, args, declared)
			d := DockerFrom{Ref: ref, Raw: raw, Line: ins.line, Col: ins.col(raw), Err: err}
			if err == "" && (strings.EqualFold(ref, "scratch") || stages[strings.ToLower(ref)]) {
				if len(rest) >= 3 && strings.EqualFold(rest[1], "AS") {
					stages[strings.ToLower(rest[2])] = true
				}
				continue
			}
			if len(rest) >= 3 && strings.EqualFold(rest[1], "AS") {
				stages[strings.ToLower(rest[2])] = true
			}
			out = append(out, d)
		}
	}
	return out
}

// expandArgs replaces $NAME, ${NAME} and ${NAME:-default} with the ARG
// defaults.
func expandArgs(s string, args map[string]string, declared map[string]bool) (string, string) {
	if !strings.Contains(s, "$") {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		var name, def string
		hasDef := false
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Sprintf("FROM %s: an unterminated ${", s)
			}
			inner := s[i+2 : i+end]
			name, def, hasDef = strings.Cut(inner, ":-")
			i += end
		} else {
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
			i = j - 1
		}
		if v, ok := args[name]; ok && (v != "" || !hasDef) {
			b.WriteString(v)
		} else if hasDef {
			b.WriteString(def)
		} else if declared[name] {
			return "", fmt.Sprintf("FROM %s uses build argument %s, which has no default: hemra cannot pin it to a digest (give it one: ARG %s=image:tag)", s, name, name)
		} else {
			return "", fmt.Sprintf("FROM %s uses %s, which no ARG before the first FROM declares: hemra cannot pin it to a digest", s, name)
		}
	}
	return b.String(), ""
}

type dockerInstruction struct {
	line  int
	text  string
	first string // the instruction's first physical line, for columns
}

func (ins dockerInstruction) col(s string) int {
	if i := strings.Index(ins.first, s); i >= 0 {
		return i + 1
	}
	return 1
}

// dockerInstructions joins a Dockerfile's continuation lines and drops
// comments.
func dockerInstructions(df []byte) []dockerInstruction {
	var out []dockerInstruction
	var cur strings.Builder
	start, first := 0, ""
	sc := bufio.NewScanner(bytes.NewReader(df))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			start, first = n, line
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, dockerInstruction{line: start, text: s, first: first})
		}
		cur.Reset()
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, dockerInstruction{line: start, text: s, first: first})
	}
	return out
}

// DockerIgnore is a build context's .dockerignore, as docker applies it.
type DockerIgnore struct {
	pm *patternmatcher.PatternMatcher
}

// ParseDockerIgnore reads .dockerignore content; nil data ignores nothing.
func ParseDockerIgnore(data []byte) (*DockerIgnore, error) {
	if len(data) == 0 {
		return nil, nil
	}
	patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	return &DockerIgnore{pm: pm}, nil
}

// Ignored reports whether the context-relative slash path is left out of
// the build context. The Dockerfile and .dockerignore are always sent, as
// docker sends them.
func (d *DockerIgnore) Ignored(rel string) bool {
	if d == nil || rel == "Dockerfile" || rel == ".dockerignore" {
		return false
	}
	ok, err := d.pm.MatchesOrParentMatches(rel)
	return err == nil && ok
}

// SkipDir reports whether a whole folder can be left out (it is ignored
// and no "!" pattern can bring a file inside it back).
func (d *DockerIgnore) SkipDir(rel string) bool {
	return d != nil && !d.pm.Exclusions() && d.Ignored(rel)
}
