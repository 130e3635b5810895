package judgefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	toml "github.com/pelletier/go-toml/v2"

	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/rubric"
)

// Load reads dir/judge.toml and the prompt template it names; name is
// what diagnostics call the file ("judges/quality/judge.toml"), and src
// its bytes (for diagnostic snippets). Every problem is a diagnostic at
// its line in the file: a syntax error, an unknown key, a value of the
// wrong type or out of range, a template that is missing or has no
// {criteria} placeholder.
func Load(dir, name string) (r *rubric.Rubric, src []byte, diags hcl.Diagnostics) {
	if name == "" {
		name = filepath.Join(dir, rubric.FileName)
	}
	root, err := os.OpenRoot(dir)
	if err == nil {
		defer root.Close()
		src, err = readCapped(root, rubric.FileName)
	}
	if err != nil {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read judge.toml",
			Detail:   unwrapPath(err).Error() + ".",
			Subject:  &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	r, diags = Parse(name, src, func(rel string) ([]byte, error) {
		// Inside the folder only: the folder is what the judge
		// fingerprint covers.
		return readCapped(root, filepath.FromSlash(rel))
	})
	return r, src, diags
}

// MaxFile bounds judge.toml and each file it names: a rubric is text.
const MaxFile = 1 << 20

// readCapped reads a regular file of root no larger than MaxFile.
func readCapped(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if st.Size() > MaxFile {
		return nil, fmt.Errorf("%s is %d bytes; a judge's files are at most %d", name, st.Size(), MaxFile)
	}
	return io.ReadAll(io.LimitReader(f, MaxFile+1))
}

// Parse parses judge.toml's bytes. filename names it in diagnostics;
// readFile reads a file of the judge folder by its slash-separated path
// relative to the folder (the prompt template, a reference solution).
func Parse(filename string, src []byte, readFile func(rel string) ([]byte, error)) (*rubric.Rubric, hcl.Diagnostics) {
	if b, ok := bytes.CutPrefix(src, []byte("\xef\xbb\xbf")); ok {
		// Keep positions where they are in the file.
		src = append([]byte("   "), b...)
	}
	var doc map[string]any
	if err := toml.Unmarshal(src, &doc); err != nil {
		return nil, hcl.Diagnostics{dataset.TOMLSyntaxDiagnostic(filename, "Invalid judge.toml", src, err)}
	}
	d := &decoder{filename: filename, src: src}
	r := d.decode(doc, readFile)
	sort.SliceStable(d.diags, func(i, j int) bool { return d.diags[i].Subject.Start.Byte < d.diags[j].Subject.Start.Byte })
	return r, d.diags
}

// Keys of each table, in documentation order. Unknown keys are errors.
var (
	judgeKeys = []string{
		// rewardkit's
		"judge", "model", "files", "mode", "timeout", "reasoning_effort", "isolated", "cwd",
		"reference", "atif-trajectory", "weight", "prompt_template",
		// hemra's
		"max_tokens", "instruction", "last_message", "artifacts", "workdir", "trajectory", "verifier",
	}
	criterionKeys = []string{"name", "description", "type", "points", "min", "max", "weight", "files", "negate", "optional"}
	scoringKeys   = []string{"aggregation", "threshold"}
	rootKeys      = []string{"judge", "criterion", "scoring"}
)

type decoder struct {
	filename string
	src      []byte
	ranges   map[string]hcl.Range
	diags    hcl.Diagnostics
}

func (d *decoder) rangeOf(keyPath string) *hcl.Range {
	if d.ranges == nil {
		d.ranges = dataset.TOMLKeyRanges(d.filename, d.src)
	}
	for p := keyPath; p != ""; {
		if r, ok := d.ranges[p]; ok && r.End.Byte > r.Start.Byte {
			return &r
		}
		// go-toml gives an array no range of its own: its first element
		// is on its line.
		if r, ok := d.ranges[p+".0"]; ok && r.End.Byte > r.Start.Byte {
			return &r
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return &hcl.Range{Filename: d.filename, Start: hcl.InitialPos, End: hcl.InitialPos}
}

func (d *decoder) errorf(keyPath, summary, format string, a ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, a...),
		Subject:  d.rangeOf(keyPath),
	})
}

// table is one TOML table and its dotted path.
type table struct {
	d    *decoder
	path string
	m    map[string]any
}

func (t *table) key(k string) string {
	if t.path == "" {
		return k
	}
	return t.path + "." + k
}

// checkKeys reports every key not in known, with a suggestion.
func (t *table) checkKeys(known []string, what string) {
	var unknown []string
	for k := range t.m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		detail := fmt.Sprintf("%s has no key %q. Known keys: %s.", what, k, strings.Join(known, ", "))
		if s := suggest(k, known); s != "" {
			detail = fmt.Sprintf("%s has no key %q. Did you mean %q?", what, k, s)
		}
		t.d.errorf(t.key(k), "Unknown key in judge.toml", "%s", detail)
	}
}

func (t *table) wrong(k, want string, v any) {
	t.d.errorf(t.key(k), "Invalid judge.toml", "%s must be %s, not %s.", t.key(k), want, dataset.TOMLTypeName(v))
}

func (t *table) str(k, def string) string {
	v, ok := t.m[k]
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		t.wrong(k, "a string", v)
		return def
	}
	return s
}

func (t *table) boolean(k string) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		t.wrong(k, "true or false", v)
	}
	return b
}

// number reads an integer or a float (TOML's 1 and 1.0 are both numbers
// to rewardkit).
func (t *table) number(k string, def float64) (float64, bool) {
	v, ok := t.m[k]
	if !ok {
		return def, false
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			t.d.errorf(t.key(k), "Invalid judge.toml", "%s must be a finite number.", t.key(k))
			return def, false
		}
		return n, true
	}
	t.wrong(k, "a number", v)
	return def, false
}

func (t *table) integer(k string, def int) (int, bool) {
	v, ok := t.m[k]
	if !ok {
		return def, false
	}
	n, isInt := v.(int64)
	if f, isFloat := v.(float64); isFloat && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
		n, isInt = int64(f), true
	}
	if !isInt {
		t.wrong(k, "an integer", v)
		return def, false
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		t.d.errorf(t.key(k), "Invalid judge.toml", "%s is out of range.", t.key(k))
		return def, false
	}
	return int(n), true
}

func (t *table) strings(k string) []string {
	v, ok := t.m[k]
	if !ok {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		t.wrong(k, "an array of strings", v)
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.d.errorf(fmt.Sprintf("%s.%d", t.key(k), i), "Invalid judge.toml", "%s must be an array of strings; element %d is %s.", t.key(k), i+1, dataset.TOMLTypeName(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (d *decoder) decode(doc map[string]any, readFile func(string) ([]byte, error)) *rubric.Rubric {
	root := &table{d: d, m: doc}
	root.checkKeys(rootKeys, "judge.toml")
	r := &rubric.Rubric{
		Judge: rubric.DefaultJudge, Mode: rubric.ModeBatched, TimeoutSec: rubric.DefaultTimeoutSec, Weight: 1,
		Aggregation: rubric.AggWeightedMean, Threshold: 0.5,
	}

	jv, hasJudge := doc["judge"]
	jm, ok := jv.(map[string]any)
	switch {
	case !hasJudge:
		d.errorf("", "Not a judge file", "judge.toml needs a [judge] table (the model and the files it reads) and at least one [[criterion]], as a rewardkit judge file has.")
	case !ok:
		root.wrong("judge", "a table", jv)
	default:
		d.judgeTable(r, &table{d: d, path: "judge", m: jm}, readFile)
	}

	cv, hasCriteria := doc["criterion"]
	carr, ok := cv.([]any)
	switch {
	case !hasCriteria:
		d.errorf("", "No criteria", "judge.toml has no [[criterion]]: add at least one, with a description of what to evaluate.")
	case !ok:
		root.wrong("criterion", "an array of tables ([[criterion]])", cv)
	case len(carr) == 0:
		d.errorf("criterion", "No criteria", "criterion is empty: add at least one [[criterion]].")
	}
	seen := map[string]string{}
	for i, e := range carr {
		p := fmt.Sprintf("criterion.%d", i)
		m, ok := e.(map[string]any)
		if !ok {
			d.errorf(p, "Invalid judge.toml", "each criterion must be a table, not %s.", dataset.TOMLTypeName(e))
			continue
		}
		c := d.criterion(&table{d: d, path: p, m: m}, i)
		if prev, dup := seen[c.Name]; dup && c.Name != "" {
			d.errorf(p, "Duplicate criterion name", "criterion %d is named %q, like %s: the judge answers each criterion by its name, so names must differ (set name).", i+1, c.Name, prev)
		}
		seen[c.Name] = fmt.Sprintf("criterion %d", i+1)
		if len(c.Files) > 0 && r.Mode == rubric.ModeBatched {
			d.errorf(p+".files", "Criterion files need individual mode", `per-criterion files require the judge to use mode = "individual". Set [judge].mode = "individual" or remove the criterion-level files.`)
		}
		r.Criteria = append(r.Criteria, c)
	}

	if sv, ok := doc["scoring"]; ok {
		sm, ok := sv.(map[string]any)
		if !ok {
			root.wrong("scoring", "a table", sv)
		} else {
			t := &table{d: d, path: "scoring", m: sm}
			t.checkKeys(scoringKeys, "[scoring]")
			r.Aggregation = t.str("aggregation", rubric.AggWeightedMean)
			switch r.Aggregation {
			case rubric.AggWeightedMean, rubric.AggAllPass, rubric.AggAnyPass, rubric.AggThreshold:
			default:
				d.errorf("scoring.aggregation", "Invalid aggregation", "aggregation must be one of weighted_mean, all_pass, any_pass, threshold; not %q.", r.Aggregation)
			}
			r.Threshold, _ = t.number("threshold", 0.5)
		}
	}
	return r
}

func (d *decoder) judgeTable(r *rubric.Rubric, t *table, readFile func(string) ([]byte, error)) {
	t.checkKeys(judgeKeys, "[judge]")
	r.Judge = t.str("judge", rubric.DefaultJudge)
	if slices.Contains(rubric.AgentJudges, r.Judge) {
		d.errorf("judge.judge", "Agent judges are not supported", "%q is one of rewardkit's agent judges, a CLI that explores the workspace with its own tools and network. hemra runs LLM judges only, with no network and through its model gateway: name a model instead (\"anthropic/claude-sonnet-4-6\").", r.Judge)
	}
	if strings.TrimSpace(r.Judge) == "" {
		d.errorf("judge.judge", "Invalid judge.toml", "judge must name a model, like \"anthropic/claude-sonnet-4-6\".")
	}
	r.Model = t.str("model", "")
	r.Files = d.paths(t, "files")
	r.Mode = t.str("mode", rubric.ModeBatched)
	if r.Mode != rubric.ModeBatched && r.Mode != rubric.ModeIndividual {
		d.errorf("judge.mode", "Invalid mode", "mode must be \"batched\" (one call for every criterion) or \"individual\" (one call per criterion), not %q.", r.Mode)
	}
	if n, ok := t.integer("timeout", rubric.DefaultTimeoutSec); ok {
		if n <= 0 {
			d.errorf("judge.timeout", "Invalid timeout", "timeout is in seconds and must be positive, not %d.", n)
		} else {
			r.TimeoutSec = n
		}
	}
	r.ReasoningEffort = t.str("reasoning_effort", "")
	if _, set := t.m["reasoning_effort"]; set && !slices.Contains([]string{"low", "medium", "high"}, r.ReasoningEffort) {
		d.errorf("judge.reasoning_effort", "Invalid reasoning_effort", "reasoning_effort must be \"low\", \"medium\" or \"high\", not %q.", r.ReasoningEffort)
	}
	r.Isolated = t.boolean("isolated")
	r.Cwd = t.str("cwd", "")
	r.Reference = t.str("reference", "")
	if r.Reference != "" {
		if !strings.HasPrefix(r.Reference, "/") {
			rel, ok := inFolder(r.Reference)
			if !ok {
				d.errorf("judge.reference", "Invalid reference", "reference %q is outside the judge folder: name a file in the folder, or an absolute path in the task's tests (/tests/...) or the agent's filesystem.", r.Reference)
			} else if _, err := readFile(rel); err != nil {
				d.errorf("judge.reference", "Reference not found", "reference %q: %v.", r.Reference, unwrapPath(err))
			} else {
				r.Reference = rel
			}
		} else {
			r.Reference = path.Clean(r.Reference)
		}
	}
	r.ATIFTrajectory = t.str("atif-trajectory", "")
	if r.ATIFTrajectory != "" {
		r.ATIFTrajectory = agentPath(r.ATIFTrajectory)
	}
	if w, ok := t.number("weight", 1); ok {
		if w < 0 {
			d.errorf("judge.weight", "Invalid weight", "weight must not be negative.")
		} else {
			r.Weight = w
		}
	}
	if n, ok := t.integer("max_tokens", 0); ok {
		if n <= 0 {
			d.errorf("judge.max_tokens", "Invalid max_tokens", "max_tokens must be positive, not %d.", n)
		} else {
			r.MaxTokens = n
		}
	}
	r.Sees = rubric.Inputs{
		Instruction: t.boolean("instruction"),
		LastMessage: t.boolean("last_message"),
		Artifacts:   t.boolean("artifacts"),
		Workdir:     t.boolean("workdir"),
		Trajectory:  t.boolean("trajectory"),
		Verifier:    t.boolean("verifier"),
	}
	if tp := t.str("prompt_template", ""); tp != "" {
		rel, ok := inFolder(tp)
		switch ext := strings.ToLower(path.Ext(tp)); {
		case !ok:
			d.errorf("judge.prompt_template", "Invalid prompt_template", "prompt_template %q is outside the judge folder: keep the template beside judge.toml.", tp)
		case ext != ".md" && ext != ".txt":
			d.errorf("judge.prompt_template", "Invalid prompt_template", "prompt_template must be a .txt or .md file, got: %s.", tp)
		default:
			b, err := readFile(rel)
			switch {
			case err != nil:
				d.errorf("judge.prompt_template", "Prompt template not found", "prompt_template %q: %v.", tp, unwrapPath(err))
			case !strings.Contains(string(b), "{criteria}"):
				d.errorf("judge.prompt_template", "Prompt template has no {criteria}", "prompt_template %s must contain '{criteria}' placeholder, where the criteria are written in.", tp)
			default:
				r.PromptTemplate, r.Template = rel, string(b)
			}
		}
	}
}

func (d *decoder) criterion(t *table, i int) rubric.Criterion {
	t.checkKeys(criterionKeys, "[[criterion]]")
	c := rubric.Criterion{Type: rubric.TypeBinary, Points: 5, Min: 0, Max: 1, Weight: 1}
	c.Description = t.str("description", "")
	if _, ok := t.m["description"]; !ok {
		d.errorf(t.path, "Criterion without description", "criterion %d has no description: say what the judge evaluates (this text is sent to the model).", i+1)
	}
	c.Name = t.str("name", "")
	if c.Name == "" {
		c.Name = rubric.Slug(c.Description)
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("criterion_%d", i)
	}
	c.Type = t.str("type", rubric.TypeBinary)
	switch c.Type {
	case rubric.TypeBinary, rubric.TypeLikert, rubric.TypeNumeric:
	default:
		d.errorf(t.key("type"), "Invalid criterion type", "type must be binary, likert or numeric, not %q.", c.Type)
	}
	if n, ok := t.integer("points", 5); ok {
		if n < 1 {
			d.errorf(t.key("points"), "Invalid points", "points is the size of the likert scale and must be at least 1, not %d.", n)
		} else {
			c.Points = n
		}
	}
	c.Min, _ = t.number("min", 0)
	c.Max, _ = t.number("max", 1)
	if c.Type == rubric.TypeNumeric && c.Max <= c.Min {
		d.errorf(t.key("max"), "Invalid numeric range", "max (%g) must be greater than min (%g).", c.Max, c.Min)
	}
	if w, ok := t.number("weight", 1); ok {
		if w < 0 {
			d.errorf(t.key("weight"), "Invalid weight", "weight must not be negative.")
		} else {
			c.Weight = w
		}
	}
	c.Files = d.paths(t, "files")
	c.Negate = t.boolean("negate")
	c.Optional = t.boolean("optional")
	return c
}

// paths reads a list of agent filesystem paths.
func (d *decoder) paths(t *table, k string) []string {
	ps := t.strings(k)
	for i, p := range ps {
		if strings.TrimSpace(p) == "" {
			d.errorf(fmt.Sprintf("%s.%d", t.key(k), i), "Invalid judge.toml", "%s holds an empty path.", t.key(k))
			continue
		}
		ps[i] = agentPath(p)
	}
	return ps
}

// agentPath cleans a path in the agent's filesystem; a relative one stays
// relative (to the agent's working directory).
func agentPath(p string) string { return path.Clean(p) }

// inFolder cleans a path relative to the judge folder, false when it
// leaves the folder.
func inFolder(p string) (string, bool) {
	c := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if c == ".." || strings.HasPrefix(c, "../") || strings.HasPrefix(c, "/") {
		return "", false
	}
	return c, true
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// suggest is the known key closest to k, when one is close.
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if d := levenshtein.Distance(k, c, nil); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
