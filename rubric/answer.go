package rubric

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Score is one criterion's verdict.
type Score struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Type        string          `json:"type"`
	Raw         json.RawMessage `json:"raw,omitempty"` // the score as the model wrote it
	Value       float64         `json:"value"`         // normalised to [0, 1] (negated if the criterion says so)
	Weight      float64         `json:"weight"`
	Reasoning   string          `json:"reasoning,omitempty"`
	// Skipped: an optional criterion the answer left out; it is not in the
	// aggregate.
	Skipped bool `json:"skipped,omitempty"`
}

var (
	fencedJSON = regexp.MustCompile("(?s)```(?:json)?\\s*(\\{.*?\\})\\s*```")
	bracedJSON = regexp.MustCompile(`(?s)\{.*\}`)
)

// ParseAnswer reads a model's answer as rewardkit does: the first fenced
// JSON object, else everything from the first "{" to the last "}"; one
// criterion may answer with the flat {"score", "reasoning"} shape, several
// answer by criterion name. An error means the answer does not follow the
// asked shape (the call may be tried again).
func ParseAnswer(text string, criteria []Criterion) ([]Score, error) {
	var obj string
	if m := fencedJSON.FindStringSubmatch(text); m != nil {
		obj = m[1]
	} else if m := bracedJSON.FindString(text); m != "" {
		obj = m
	} else {
		return nil, fmt.Errorf("could not parse JSON from judge response: %s", cut(text, 200))
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &data); err != nil {
		return nil, fmt.Errorf("the judge's answer is not a JSON object: %v", err)
	}
	if len(criteria) == 1 {
		if s, ok := data["score"]; ok && !isObject(s) {
			data = map[string]json.RawMessage{criteria[0].Name: json.RawMessage(obj)}
		}
	}
	scores := make([]Score, 0, len(criteria))
	for _, c := range criteria {
		sc := Score{Name: c.Name, Description: c.Description, Type: c.Type, Weight: c.Weight}
		var entry map[string]json.RawMessage
		raw, present := data[c.Name]
		if present && json.Unmarshal(raw, &entry) == nil && entry["score"] != nil {
			sc.Raw = entry["score"]
		} else {
			if c.Optional {
				sc.Skipped = true
				scores = append(scores, sc)
				continue
			}
			got := "nothing"
			if present {
				got = cut(string(raw), 100)
			}
			return nil, fmt.Errorf("criterion %q: expected an object with \"score\" and \"reasoning\", got %s", c.Name, got)
		}
		if r, ok := entry["reasoning"]; ok {
			var s string
			if json.Unmarshal(r, &s) != nil {
				s = string(r)
			}
			sc.Reasoning = s
		}
		v, err := c.Normalize(sc.Raw)
		if err != nil {
			return nil, fmt.Errorf("criterion %q: %v", c.Name, err)
		}
		sc.Value = v
		scores = append(scores, sc)
	}
	return scores, nil
}

func isObject(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return strings.HasPrefix(s, "{")
}

// Normalize maps a raw score to [0, 1] as rewardkit does — binary: yes,
// true or 1 is 1, anything else 0; likert: (raw-1)/(points-1); numeric:
// (raw-min)/(max-min), both clamped — then negates it when the criterion
// says so.
func (c Criterion) Normalize(raw json.RawMessage) (float64, error) {
	var v float64
	switch c.Type {
	case TypeLikert, TypeNumeric:
		f, err := pyNumber(raw)
		if err != nil {
			return 0, err
		}
		lo, span := 1.0, float64(c.Points-1)
		if c.Type == TypeNumeric {
			lo, span = c.Min, c.Max-c.Min
		}
		if span <= 0 {
			v = 1
		} else {
			v = max(0, min(1, (f-lo)/span))
		}
	default:
		v = binary(raw)
	}
	if c.Negate {
		v = 1 - v
	}
	return v, nil
}

// binary is rewardkit's binary reading of a raw value.
func binary(raw json.RawMessage) float64 {
	var x any
	if json.Unmarshal(raw, &x) != nil {
		return 0
	}
	switch x := x.(type) {
	case bool:
		if x {
			return 1
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "yes", "true", "1":
			return 1
		}
	case float64:
		if x != 0 {
			return 1
		}
	case []any:
		if len(x) > 0 {
			return 1
		}
	case map[string]any:
		if len(x) > 0 {
			return 1
		}
	}
	return 0
}

// pyNumber is Python's float() of a JSON value: numbers, booleans and
// numeric strings.
func pyNumber(raw json.RawMessage) (float64, error) {
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		return 0, err
	}
	var f float64
	switch x := x.(type) {
	case float64:
		f = x
	case bool:
		if x {
			f = 1
		}
	case string:
		var err error
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("could not convert string to float: %q", x)
		}
	default:
		return 0, fmt.Errorf("the score %s is not a number", cut(string(raw), 50))
	}
	if math.IsNaN(f) {
		return 0, fmt.Errorf("the score is not a number")
	}
	return f, nil
}

// Aggregate combines criterion scores into the judge's score with its
// [scoring] aggregation: weighted_mean (total weight 0 gives 0), all_pass
// and any_pass (a criterion passes above 0), threshold (1 when the
// weighted mean reaches it). Skipped criteria are left out; false when no
// criterion was scored.
func (r *Rubric) Aggregate(scores []Score) (float64, bool) {
	var vals []Score
	for _, s := range scores {
		if !s.Skipped {
			vals = append(vals, s)
		}
	}
	if len(vals) == 0 {
		return 0, false
	}
	mean := func() float64 {
		var tw, sum float64
		for _, s := range vals {
			tw += s.Weight
			sum += s.Value * s.Weight
		}
		if tw == 0 {
			return 0
		}
		return sum / tw
	}
	var v float64
	switch r.Aggregation {
	case AggAllPass:
		v = 1
		for _, s := range vals {
			if s.Value <= 0 {
				v = 0
			}
		}
	case AggAnyPass:
		for _, s := range vals {
			if s.Value > 0 {
				v = 1
			}
		}
	case AggThreshold:
		if mean() >= r.Threshold {
			v = 1
		}
	default:
		v = mean()
	}
	return math.Round(v*1e4) / 1e4, true
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
