package judgefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/rubric"
)

func loadFile(t *testing.T, file string) (*rubric.Rubric, string) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rubric.FileName), src, 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, diags := Load(dir, "")
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%d: %s: %s", d.Subject.Start.Line, d.Summary, d.Detail))
	}
	return r, strings.Join(msgs, "\n")
}

// TestRewardkitFilesLoadUnchanged: the LLM judge files of rewardkit's own
// documentation and example task load as they are, with rewardkit's
// defaults and names.
func TestRewardkitFilesLoadUnchanged(t *testing.T) {
	for _, name := range []string{"example-quality.toml", "docs-llm-judge.toml", "docs-individual.toml", "docs-trajectory.toml", "docs-index-judge.toml", "docs-index-scoring.toml"} {
		t.Run(name, func(t *testing.T) {
			r, diags := loadFile(t, filepath.Join("testdata", "rewardkit", name))
			if diags != "" {
				t.Fatalf("diagnostics:\n%s", diags)
			}
			if r.Judge != "anthropic/claude-sonnet-4-6" || r.Provider() != "anthropic" || r.ModelName() != "claude-sonnet-4-6" {
				t.Errorf("judge %q provider %q model %q", r.Judge, r.Provider(), r.ModelName())
			}
			if len(r.Criteria) == 0 {
				t.Errorf("no criteria")
			}
		})
	}

	r, _ := loadFile(t, "testdata/rewardkit/example-quality.toml")
	if got := strings.Join(r.Files, ","); got != "/app/textstats.py,/app/analyze.py" {
		t.Errorf("files %s", got)
	}
	if c := r.Criteria[1]; c.Name != "code_readability" || c.Type != rubric.TypeLikert || c.Points != 5 || c.Weight != 1 {
		t.Errorf("criterion 2: %+v", c)
	}
	if r.Mode != rubric.ModeBatched || r.TimeoutSec != 300 || r.Aggregation != rubric.AggWeightedMean || r.Threshold != 0.5 || r.Weight != 1 {
		t.Errorf("defaults: %+v", r)
	}

	r, _ = loadFile(t, "testdata/rewardkit/docs-llm-judge.toml")
	if c := r.Criteria[0]; c.Name != "is_the_code_correct" || c.Type != rubric.TypeBinary {
		t.Errorf("slug name: %+v", c)
	}
	if c := r.Criteria[2]; c.Type != rubric.TypeNumeric || c.Min != 0 || c.Max != 100 || c.Name != "rate_the_test_coverage_on_a_scale_from_0" {
		t.Errorf("numeric: %+v", c)
	}
	r, _ = loadFile(t, "testdata/rewardkit/docs-individual.toml")
	if r.Mode != rubric.ModeIndividual || r.Criteria[1].Files[0] != "/app/data.xlsx" {
		t.Errorf("individual: %+v", r)
	}
	r, _ = loadFile(t, "testdata/rewardkit/docs-trajectory.toml")
	if r.ATIFTrajectory != "/logs/trajectory.json" || !strings.Contains(r.SystemPrompt(r.Criteria), "AND its trajectory") {
		t.Errorf("trajectory: %q", r.ATIFTrajectory)
	}
	r, _ = loadFile(t, "testdata/rewardkit/docs-index-scoring.toml")
	if r.Aggregation != rubric.AggAllPass || r.Weight != 2 || r.Criteria[0].Weight != 2 {
		t.Errorf("scoring: %+v", r)
	}
}

func TestAgentJudgeRefused(t *testing.T) {
	_, diags := loadFile(t, "testdata/rewardkit/docs-agent-judge.toml")
	if !strings.Contains(diags, "2: Agent judges are not supported") {
		t.Errorf("diagnostics:\n%s", diags)
	}
}

func parse(t *testing.T, src string, files map[string]string) (*rubric.Rubric, string) {
	t.Helper()
	r, diags := Parse("judge.toml", []byte(src), func(rel string) ([]byte, error) {
		if s, ok := files[rel]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	})
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Summary))
	}
	return r, strings.Join(msgs, "\n")
}

// TestDiagnosticsAtTheirLine: unknown keys and bad values are errors at
// the line that holds them.
func TestDiagnosticsAtTheirLine(t *testing.T) {
	src := `[judge]
judge = "openai/gpt-5-mini"
mdoe = "batched"
timeout = -1
prompt_template = "nope.md"

[[criterion]]
description = "Is it correct?"
type = "ternary"

[[criterion]]
descripton = "typo"
points = "five"

[[criterion]]
description = "Files here"
files = ["/app/x"]

[scoring]
aggregation = "median"
extra = 1
`
	_, got := parse(t, src, nil)
	want := strings.Join([]string{
		"3: Unknown key in judge.toml",
		"4: Invalid timeout",
		"5: Prompt template not found",
		"9: Invalid criterion type",
		"11: Criterion without description",
		"12: Unknown key in judge.toml",
		"13: Invalid judge.toml",
		"17: Criterion files need individual mode",
		"20: Invalid aggregation",
		"21: Unknown key in judge.toml",
	}, "\n")
	if got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}

	if _, got := parse(t, "[judge]\njudge = \"x\"\n[[criterion]]\nname = \"a\"\ndescription = \"one\"\n[[criterion]]\nname = \"a\"\ndescription = \"two\"\n", nil); got != "6: Duplicate criterion name" {
		t.Errorf("duplicate: %s", got)
	}
	if _, got := parse(t, "[judge\n", nil); !strings.HasPrefix(got, "1: Invalid judge.toml") {
		t.Errorf("syntax: %s", got)
	}
	if _, got := parse(t, "[judge]\nprompt_template = \"../x.md\"\nreference = \"../../etc/passwd\"\n[[criterion]]\ndescription = \"d\"\n", nil); got != "2: Invalid prompt_template\n3: Invalid reference" {
		t.Errorf("outside the folder: %s", got)
	}
	if _, got := parse(t, "[judge]\nprompt_template = \"p.md\"\n[[criterion]]\ndescription = \"d\"\n", map[string]string{"p.md": "no placeholder"}); got != "2: Prompt template has no {criteria}" {
		t.Errorf("template: %s", got)
	}
	if _, got := parse(t, "[[criterion]]\ndescription = \"d\"\n", nil); got != "1: Not a judge file" {
		t.Errorf("no [judge]: %s", got)
	}
	if _, got := parse(t, "[judge]\ninstrction = true\n[[criterion]]\ndescription = \"d\"\n", nil); got != "2: Unknown key in judge.toml" {
		t.Errorf("suggestion: %s", got)
	}
}

func TestHemraKeys(t *testing.T) {
	r, diags := parse(t, `[judge]
judge = "openai/gpt-5-mini"
instruction = true
last_message = true
artifacts = true
workdir = true
trajectory = true
verifier = true
max_tokens = 512
prompt_template = "prompt.md"
reference = "ref/solution.py"

[[criterion]]
description = "Does the code leak a secret?"
negate = true

[[criterion]]
description = "Style"
type = "likert"
points = 3
optional = true
`, map[string]string{"prompt.md": "Judge this.\n{criteria}\n", "ref/solution.py": "print(1)\n"})
	if diags != "" {
		t.Fatal(diags)
	}
	want := rubric.Inputs{Instruction: true, LastMessage: true, Artifacts: true, Workdir: true, Trajectory: true, Verifier: true}
	if r.Sees != want || r.MaxTokens != 512 || r.Provider() != "openai" || r.ModelName() != "gpt-5-mini" || r.Reference != "ref/solution.py" {
		t.Errorf("rubric %+v", r)
	}
	if !strings.HasPrefix(r.SystemPrompt(r.Criteria), "Judge this.\n- 'does_the_code_leak_a_secret': ") {
		t.Errorf("template: %q", r.SystemPrompt(r.Criteria))
	}
	if !r.Criteria[0].Negate || !r.Criteria[1].Optional {
		t.Errorf("criteria %+v", r.Criteria)
	}
}

func TestTooBig(t *testing.T) {
	dir := t.TempDir()
	big := "[judge]\n# " + strings.Repeat("x", MaxFile) + "\n[[criterion]]\ndescription = \"d\"\n"
	os.WriteFile(filepath.Join(dir, rubric.FileName), []byte(big), 0o644)
	if _, _, diags := Load(dir, ""); !diags.HasErrors() || !strings.Contains(diags[0].Detail, "at most") {
		t.Errorf("a %d-byte judge.toml: %v", len(big), diags)
	}
}
