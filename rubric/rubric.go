package rubric

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// FileName is the judge file a judge folder holds.
const FileName = "judge.toml"

// SemanticsVersion names how hemra judges with a rubric: the prompt, the
// inputs, the parsing and the aggregation. It is part of every judge
// fingerprint; changing any of those bumps it, so every judge runs again.
const SemanticsVersion = "hemra-judge/1"

// DefaultJudge is rewardkit's default [judge].judge.
const DefaultJudge = "anthropic/claude-sonnet-4-6"

// Modes of [judge].mode.
const (
	ModeBatched    = "batched"    // one model call for every criterion
	ModeIndividual = "individual" // one model call per criterion
)

// Criterion types.
const (
	TypeBinary  = "binary"
	TypeLikert  = "likert"
	TypeNumeric = "numeric"
)

// Aggregations of [scoring].aggregation.
const (
	AggWeightedMean = "weighted_mean"
	AggAllPass      = "all_pass"
	AggAnyPass      = "any_pass"
	AggThreshold    = "threshold"
)

// Rubric is a parsed judge.toml. Its JSON form is what hemra hands its
// judge runtime, which never reads the TOML itself.
type Rubric struct {
	// Judge is [judge].judge: a LiteLLM model string such as
	// "anthropic/claude-sonnet-4-6" (provider prefix, then the model).
	Judge string `json:"judge"`
	// Model is [judge].model, which rewardkit reads for agent judges only.
	Model string `json:"model,omitempty"`
	// Files are paths in the agent's filesystem whose contents the judge
	// reads: absolute, or relative to the agent's working directory. A
	// folder contributes the files directly in it.
	Files      []string `json:"files,omitempty"`
	Mode       string   `json:"mode"`
	TimeoutSec int      `json:"timeout_sec"`
	// ReasoningEffort is sent only when judge.toml sets it.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Reference is a reference solution: relative to the judge folder, or
	// an absolute path (under /tests: the task's tests; elsewhere: the
	// agent's filesystem).
	Reference string `json:"reference,omitempty"`
	// ATIFTrajectory is [judge].atif-trajectory: an ATIF trajectory file in
	// the agent's filesystem. Where the agent left none, the judge reads the
	// trajectory hemra built from the agent's events.
	ATIFTrajectory string `json:"atif_trajectory,omitempty"`
	// Weight is the judge's weight among a folder's rewards in rewardkit;
	// hemra records it.
	Weight float64 `json:"weight"`
	// PromptTemplate is the template's path relative to the judge folder,
	// Template its text (with a {criteria} placeholder).
	PromptTemplate string `json:"prompt_template,omitempty"`
	Template       string `json:"template,omitempty"`
	// MaxTokens bounds each answer (Anthropic requires one); 0 means
	// DefaultMaxTokens.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Isolated and Cwd are rewardkit's agent-judge keys, accepted so a
	// rewardkit file loads; an LLM judge does not use them.
	Isolated bool   `json:"isolated,omitempty"`
	Cwd      string `json:"cwd,omitempty"`

	// Sees says which of the attempt's records the judge reads, besides
	// Files, Reference and ATIFTrajectory.
	Sees Inputs `json:"sees"`

	Criteria    []Criterion `json:"criteria"`
	Aggregation string      `json:"aggregation"`
	Threshold   float64     `json:"threshold"`
}

// Inputs are hemra's [judge] keys naming what the judge sees of an attempt.
// Each is off unless judge.toml turns it on.
type Inputs struct {
	Instruction bool `json:"instruction,omitempty"`  // the task's instruction (a JSONL task: its input)
	LastMessage bool `json:"last_message,omitempty"` // the agent's last message (else its final output)
	Artifacts   bool `json:"artifacts,omitempty"`    // the files the agent left in its artifact folder
	Workdir     bool `json:"workdir,omitempty"`      // a copy of the agent's working directory
	Trajectory  bool `json:"trajectory,omitempty"`   // a trajectory built from the agent's events
	Verifier    bool `json:"verifier,omitempty"`     // the verifier's reward and reward-details.json
}

// Criterion is one [[criterion]].
type Criterion struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Type        string   `json:"type"`
	Points      int      `json:"points,omitempty"` // likert
	Min         float64  `json:"min"`              // numeric
	Max         float64  `json:"max"`              // numeric
	Weight      float64  `json:"weight"`
	Files       []string `json:"files,omitempty"` // individual mode only
	// Negate scores the criterion as 1 - its normalised value (a criterion
	// that asks about a fault).
	Negate bool `json:"negate,omitempty"`
	// Optional: an answer that leaves the criterion out does not fail the
	// judge; the criterion is then left out of the aggregate.
	Optional bool `json:"optional,omitempty"`
}

// DefaultMaxTokens bounds an answer when judge.toml does not.
const DefaultMaxTokens = 4096

// DefaultTimeoutSec is rewardkit's [judge].timeout.
const DefaultTimeoutSec = 300

// AgentJudges are rewardkit's agent judges: CLIs that explore the
// workspace themselves. hemra runs LLM judges only.
var AgentJudges = []string{"claude-code", "codex"}

// Provider is the model API a judge speaks, from the provider prefix of
// its LiteLLM model string ("" when it has none or hemra does not know it).
func (r *Rubric) Provider() string {
	p, _, ok := strings.Cut(r.Judge, "/")
	if !ok {
		if strings.HasPrefix(strings.ToLower(r.Judge), "claude") {
			return "anthropic" // LiteLLM routes bare claude-* names to Anthropic
		}
		return ""
	}
	switch p {
	case "anthropic", "openai":
		return p
	}
	return ""
}

// ModelName is the model the API is asked for: the LiteLLM string without
// its provider prefix ("anthropic/claude-sonnet-4-6" → "claude-sonnet-4-6").
func (r *Rubric) ModelName() string {
	if r.Provider() != "" {
		if _, m, ok := strings.Cut(r.Judge, "/"); ok {
			return m
		}
	}
	return r.Judge
}

// NeedsAgentFilesystem reports whether the judge reads files from the
// agent's filesystem, which a re-judge can only do while the agent's
// snapshot is kept.
func (r *Rubric) NeedsAgentFilesystem() bool {
	if len(r.Files) > 0 || r.Sees.Workdir || r.ATIFTrajectory != "" {
		return true
	}
	for _, c := range r.Criteria {
		if len(c.Files) > 0 {
			return true
		}
	}
	return r.Reference != "" && strings.HasPrefix(r.Reference, "/") && !underTests(r.Reference)
}

func underTests(p string) bool { return p == "/tests" || strings.HasPrefix(p, "/tests/") }

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// Slug is rewardkit's default criterion name: the first 40 characters of
// the description, lower-cased, with every run of other characters than
// a-z and 0-9 made one underscore, trimmed of underscores.
func Slug(description string) string {
	s := description
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40])
	}
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "_"), "_")
}
