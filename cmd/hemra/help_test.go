package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestHelpExamplesParse runs every example that a command's --help shows
// through the command-line parser: an example that does not parse is a
// broken promise.
func TestHelpExamplesParse(t *testing.T) {
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("hemra"), kong.Exit(func(int) {}), kong.Vars{"version": Version})
	if err != nil {
		t.Fatal(err)
	}
	var paths [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		for _, c := range n.Children {
			p := append(append([]string(nil), path...), c.Name)
			if len(c.Children) == 0 {
				paths = append(paths, p)
			}
			walk(c, p)
		}
	}
	walk(parser.Model.Node, nil)
	examples := 0
	for _, p := range paths {
		var out bytes.Buffer
		if code := Main(append(p, "--help"), strings.NewReader(""), &out, &out, nil); code != 0 {
			t.Errorf("hemra %s --help: exit %d\n%s", strings.Join(p, " "), code, out.String())
			continue
		}
		inExamples := false
		for _, line := range strings.Split(out.String(), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "Example"):
				inExamples = true
			case strings.HasPrefix(line, "Arguments:"), strings.HasPrefix(line, "Flags:"):
				inExamples = false
			}
			if !inExamples || !strings.HasPrefix(line, "hemra ") {
				continue
			}
			// The shell's part of an example: comments, pipes, redirections.
			for _, cut := range []string{"  #", " | ", " && ", " > "} {
				if i := strings.Index(line, cut); i >= 0 {
					line = line[:i]
				}
			}
			args := exampleWords(strings.TrimPrefix(line, "hemra "))
			var fresh CLI
			fp, _ := kong.New(&fresh, kong.Name("hemra"), kong.Exit(func(int) {}), kong.Vars{"version": Version})
			if _, err := fp.Parse(normalizeArgs(args)); err != nil {
				t.Errorf("hemra %s --help shows %q, which does not parse: %v", strings.Join(p, " "), line, err)
			}
			examples++
		}
	}
	if examples < 20 {
		t.Errorf("only %d examples found in the commands' help", examples)
	}
}

// exampleWords splits a line like a shell for the examples' simple quoting.
func exampleWords(s string) []string {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
