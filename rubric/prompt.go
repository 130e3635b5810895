package rubric

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
)

// The built-in system prompts, as rewardkit words them: one for a judge of
// files, one for a judge that also reads the agent's trajectory.
const (
	templateFiles      = "You are an evaluation judge. Evaluate the provided file contents against the following criteria.\n\n{criteria}\n"
	templateTrajectory = "You are an evaluation judge. You are given the agent's workspace files AND its trajectory (reasoning steps, tool calls, and strategy). Evaluate both the process and the outcome against the following criteria.\n\n{criteria}\n"
)

// SystemPrompt is the system message for one call over criteria: the
// judge's own template, else the built-in one (the trajectory one when the
// judge reads a trajectory), with {criteria} replaced by the criteria block.
func (r *Rubric) SystemPrompt(criteria []Criterion) string {
	tmpl := templateFiles
	switch {
	case r.Template != "":
		tmpl = r.Template
	case r.ATIFTrajectory != "" || r.Sees.Trajectory:
		tmpl = templateTrajectory
	}
	return strings.ReplaceAll(tmpl, "{criteria}", CriteriaBlock(criteria))
}

// CriteriaBlock lists the criteria with the form of their score, then
// asks for a JSON object and shows one, exactly as rewardkit does.
func CriteriaBlock(criteria []Criterion) string {
	var b strings.Builder
	for _, c := range criteria {
		fmt.Fprintf(&b, "- '%s': %s (score: %s)\n", c.Name, c.Description, c.fragment())
	}
	b.WriteString("\nRespond with a JSON object. Example:\n")
	if len(criteria) == 1 {
		b.WriteString("{\n  \"score\": 1,\n  \"reasoning\": \"...\"\n}")
		return b.String()
	}
	b.WriteString("{\n")
	for i, c := range criteria {
		fmt.Fprintf(&b, "  %s: {\n    \"score\": 1,\n    \"reasoning\": \"...\"\n  }", pyString(c.Name))
		if i < len(criteria)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// fragment says what form the criterion's score takes.
func (c Criterion) fragment() string {
	switch c.Type {
	case TypeLikert:
		return fmt.Sprintf("an integer from 1 to %d", c.Points)
	case TypeNumeric:
		return fmt.Sprintf("a number from %s to %s", pyFloat(c.Min), pyFloat(c.Max))
	}
	return `"yes" or "no"`
}

// ResponseSchema is the JSON schema an answer must follow (sent as a
// structured-output format where the API takes one): the flat
// {"score", "reasoning"} object for one criterion, else one such object per
// criterion name. Keys keep rewardkit's order.
func ResponseSchema(criteria []Criterion) json.RawMessage {
	if len(criteria) == 1 {
		return entrySchema(criteria[0])
	}
	var props, req bytes.Buffer
	for i, c := range criteria {
		if i > 0 {
			props.WriteByte(',')
			req.WriteByte(',')
		}
		name, _ := json.Marshal(c.Name)
		props.Write(name)
		props.WriteByte(':')
		props.Write(entrySchema(c))
		req.Write(name)
	}
	return json.RawMessage(`{"type":"object","properties":{` + props.String() + `},"required":[` + req.String() + `],"additionalProperties":false}`)
}

func entrySchema(c Criterion) json.RawMessage {
	score := `{"type":"string","enum":["yes","no"]}`
	switch c.Type {
	case TypeLikert:
		score = `{"type":"integer"}`
	case TypeNumeric:
		score = `{"type":"number"}`
	}
	return json.RawMessage(`{"type":"object","properties":{"score":` + score + `,"reasoning":{"type":"string"}},"required":["score","reasoning"],"additionalProperties":false}`)
}

// pyFloat formats a float as Python's repr does (100.0, 0.5, 1e-05).
func pyFloat(f float64) string {
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e-05 and e+16 as Python does.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyString is a JSON string as Python's json.dumps writes it (non-ASCII
// escaped as \uXXXX, nothing else beyond JSON's own escapes).
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r > 0x7f && r < 0x10000):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r >= 0x10000:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
