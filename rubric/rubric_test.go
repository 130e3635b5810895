package rubric

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestPromptAsRewardkit: the criteria block and schema rewardkit builds.
func TestPromptAsRewardkit(t *testing.T) {
	cs := []Criterion{
		{Name: "correct", Description: "Is it correct?", Type: TypeBinary, Weight: 1},
		{Name: "readable", Description: "Readable?", Type: TypeLikert, Points: 5, Weight: 1},
		{Name: "coverage", Description: "Coverage", Type: TypeNumeric, Min: 0, Max: 100, Weight: 1},
	}
	want := `- 'correct': Is it correct? (score: "yes" or "no")
- 'readable': Readable? (score: an integer from 1 to 5)
- 'coverage': Coverage (score: a number from 0.0 to 100.0)

Respond with a JSON object. Example:
{
  "correct": {
    "score": 1,
    "reasoning": "..."
  },
  "readable": {
    "score": 1,
    "reasoning": "..."
  },
  "coverage": {
    "score": 1,
    "reasoning": "..."
  }
}`
	if got := CriteriaBlock(cs); got != want {
		t.Errorf("block:\n%s\nwant:\n%s", got, want)
	}
	if got := CriteriaBlock(cs[:1]); !strings.HasSuffix(got, "Example:\n{\n  \"score\": 1,\n  \"reasoning\": \"...\"\n}") {
		t.Errorf("one criterion:\n%s", got)
	}
	r := &Rubric{}
	if got := r.SystemPrompt(cs[:1]); !strings.HasPrefix(got, "You are an evaluation judge. Evaluate the provided file contents against the following criteria.\n\n- 'correct'") || !strings.HasSuffix(got, "}\n") {
		t.Errorf("system prompt: %q", got)
	}
	var schema map[string]any
	if err := json.Unmarshal(ResponseSchema(cs), &schema); err != nil {
		t.Fatal(err)
	}
	if req := fmt.Sprint(schema["required"]); req != "[correct readable coverage]" {
		t.Errorf("required %s", req)
	}
	if got := string(ResponseSchema(cs[1:2])); got != `{"type":"object","properties":{"score":{"type":"integer"},"reasoning":{"type":"string"}},"required":["score","reasoning"],"additionalProperties":false}` {
		t.Errorf("flat schema %s", got)
	}
	for f, want := range map[float64]string{0: "0.0", 100: "100.0", 0.5: "0.5", 1e-5: "1e-05", -2.25: "-2.25"} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%g) = %s, want %s", f, got, want)
		}
	}
	if got := pyString("é\"x"); got != `"\u00e9\"x"` {
		t.Errorf("pyString %s", got)
	}
}

func TestParseAnswer(t *testing.T) {
	cs := []Criterion{
		{Name: "correct", Type: TypeBinary, Weight: 2},
		{Name: "readable", Type: TypeLikert, Points: 5, Weight: 1},
		{Name: "coverage", Type: TypeNumeric, Min: 0, Max: 100, Weight: 1},
	}
	text := "Here you go:\n```json\n{\"correct\": {\"score\": \"yes\", \"reasoning\": \"works\"}, \"readable\": {\"score\": 4, \"reasoning\": \"ok\"}, \"coverage\": {\"score\": \"150\", \"reasoning\": \"lots\"}}\n```\n"
	scores, err := ParseAnswer(text, cs)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%g %g %g %s", scores[0].Value, scores[1].Value, scores[2].Value, scores[0].Reasoning)
	if got != "1 0.75 1 works" {
		t.Errorf("scores %s", got)
	}
	r := &Rubric{Aggregation: AggWeightedMean}
	if v, _ := r.Aggregate(scores); v != 0.9375 {
		t.Errorf("weighted mean %g", v)
	}
	scores[0].Value = 0
	for agg, want := range map[string]float64{AggAllPass: 0, AggAnyPass: 1, AggThreshold: 0} {
		r := &Rubric{Aggregation: agg, Threshold: 0.5}
		if v, _ := r.Aggregate(scores); v != want {
			t.Errorf("%s: %g, want %g", agg, v, want)
		}
	}

	// One criterion: the flat shape, braces found without a fence.
	one := []Criterion{{Name: "score", Type: TypeBinary, Weight: 1}}
	if s, err := ParseAnswer(`I think {"score": true, "reasoning": "fine"} overall`, one); err != nil || s[0].Value != 1 {
		t.Errorf("flat: %v %+v", err, s)
	}
	// Negated, optional, and what is refused.
	neg := []Criterion{{Name: "leak", Type: TypeBinary, Negate: true, Weight: 1}, {Name: "style", Type: TypeLikert, Points: 3, Optional: true, Weight: 1}}
	s, err := ParseAnswer(`{"leak": {"score": "no", "reasoning": "none"}}`, neg)
	if err != nil || s[0].Value != 1 || !s[1].Skipped {
		t.Errorf("negate/optional: %v %+v", err, s)
	}
	for _, bad := range []string{"no json here", `{"correct": 1}`, `{"correct": {"score": "yes"}, "readable": {"score": "four"}, "coverage": {"score": 1}}`, `{"correct": {"score": 1}, "readable": {"score": 2}}`} {
		if _, err := ParseAnswer(bad, cs); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, ok := (&Rubric{}).Aggregate([]Score{{Skipped: true}}); ok {
		t.Errorf("nothing scored gave a score")
	}
}
