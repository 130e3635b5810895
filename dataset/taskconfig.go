package dataset

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// ParseTaskConfig parses the bytes of a task.toml. filename names the file in
// diagnostics. A TOML syntax error is one diagnostic at its line and column; a
// known key of the wrong type is a diagnostic at its value. Unknown keys are
// kept in Extra and never reported.
func ParseTaskConfig(filename string, src []byte) (*TaskConfig, hcl.Diagnostics) {
	if len(src) > MaxTaskTOML {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid task.toml",
			Detail:   fmt.Sprintf("%s is %d bytes, more than the %d MiB hemra reads.", filename, len(src), MaxTaskTOML>>20),
			Subject:  &hcl.Range{Filename: filename},
		}}
	}
	if d := countEntries(filename, src); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if bytes.HasPrefix(src, utf8BOM) {
		// TOML has no byte order mark; editors on Windows write one. Blank
		// it out on a copy so every position stays where it is in the file.
		src = append([]byte("   "), src[len(utf8BOM):]...)
	}
	var doc map[string]any
	if err := toml.Unmarshal(src, &doc); err != nil {
		return nil, hcl.Diagnostics{tomlSyntaxDiag(filename, src, err)}
	}
	d := &tomlDecoder{filename: filename, src: src}
	cfg := d.taskConfig(doc)
	// Report in the order a reader meets the problems in the file.
	slices.SortStableFunc(d.diags, func(a, b *hcl.Diagnostic) int { return cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte) })
	return cfg, d.diags
}

// MaxTaskTOMLEntries bounds the keys and tables of a task.toml. go-toml's
// decoder checks each new key against those seen before it, so its time
// grows with the square of their number (100,000 keys: 42 s); real task.toml
// files have a few dozen. The count is made first, in one linear pass of
// go-toml's own parser.
const MaxTaskTOMLEntries = 2048

// countEntries refuses a task.toml with more than MaxTaskTOMLEntries keys
// and tables (those of inline tables included), at the first one too many.
// A syntax error stops the count: the decoder reports it.
func countEntries(filename string, src []byte) *hcl.Diagnostic {
	// Every key (of a table or an inline table) has its "=", every table
	// header its "[": a file with no more of those than the limit has no
	// more entries, and needs no parse to tell (a task.toml has a few
	// dozen; go-toml parses it next).
	if bytes.Count(src, []byte("="))+bytes.Count(src, []byte("[")) <= MaxTaskTOMLEntries {
		return nil
	}
	var p unstable.Parser
	p.Reset(src)
	n := 0
	var over *unstable.Node
	var value func(v *unstable.Node)
	value = func(v *unstable.Node) {
		switch v.Kind {
		case unstable.Array:
			for it := v.Children(); it.Next() && over == nil; {
				value(it.Node())
			}
		case unstable.InlineTable:
			for it := v.Children(); it.Next() && over == nil; {
				kv := it.Node()
				if n++; n > MaxTaskTOMLEntries {
					over = kv
					return
				}
				value(kv.Value())
			}
		}
	}
	for over == nil && p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			if n++; n > MaxTaskTOMLEntries {
				over = e
			}
		case unstable.KeyValue:
			if n++; n > MaxTaskTOMLEntries {
				over = e
				break
			}
			value(e.Value())
		}
	}
	if over == nil {
		return nil
	}
	d := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid task.toml",
		Detail:   fmt.Sprintf("%s has more than %d keys and tables, the most hemra reads.", filename, MaxTaskTOMLEntries),
		Subject:  &hcl.Range{Filename: filename},
	}
	if it := over.Key(); it.Next() {
		sh := p.Shape(it.Node().Raw)
		d.Subject = &hcl.Range{Filename: filename,
			Start: hcl.Pos{Line: sh.Start.Line, Column: sh.Start.Column, Byte: sh.Start.Offset},
			End:   hcl.Pos{Line: sh.End.Line, Column: sh.End.Column, Byte: sh.End.Offset}}
	}
	return d
}

// tomlSyntaxDiag turns a go-toml decode error into a diagnostic pointing at
// the line and column go-toml reports.
func tomlSyntaxDiag(filename string, src []byte, err error) *hcl.Diagnostic {
	diag := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid task.toml",
		Detail:   strings.TrimPrefix(err.Error(), "toml: ") + ".",
		Subject:  &hcl.Range{Filename: filename},
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		start := posAt(src, line, col)
		end := start
		if end.Byte < len(src) {
			end.Byte++
			end.Column++
		}
		diag.Subject = &hcl.Range{Filename: filename, Start: start, End: end}
	}
	return diag
}

// posAt converts a 1-based line and byte column into an hcl.Pos.
func posAt(src []byte, line, col int) hcl.Pos {
	off := 0
	for l := 1; l < line && off < len(src); l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			off = len(src)
			break
		}
		off += i + 1
	}
	off += col - 1
	off = min(max(off, 0), len(src))
	return hcl.Pos{Line: line, Column: col, Byte: off}
}

// tomlDecoder reads the generic map go-toml produced into TaskConfig,
// collecting type errors as diagnostics and unknown keys into Extra.
type tomlDecoder struct {
	filename string
	src      []byte
	diags    hcl.Diagnostics
	extra    map[string]any
	ranges   map[string]hcl.Range // key path → value range; built on the first error
}

// table is one TOML table being decoded. path is its dotted key path ("" for
// the root); keys read are marked used so the rest can go to Extra.
type table struct {
	d    *tomlDecoder
	path string
	m    map[string]any
	// used lists the keys read; tables are small, so a slice on a
	// fixed array beats a map (this runs once per key of 10,000s of files).
	used    []string
	usedBuf [8]string
	// extra, when set, receives unknown keys (relative to this table)
	// instead of the decoder's top-level Extra.
	extra map[string]any
}

func (d *tomlDecoder) root(m map[string]any) *table {
	return d.newTable("", m)
}

func (d *tomlDecoder) newTable(path string, m map[string]any) *table {
	t := &table{d: d, path: path, m: m}
	t.used = t.usedBuf[:0]
	return t
}

func (t *table) markUsed(key string) {
	if !slices.Contains(t.used, key) {
		t.used = append(t.used, key)
	}
}

func (t *table) keyPath(key string) string {
	if t.path == "" {
		return key
	}
	return t.path + "." + key
}

func (t *table) get(key string) (any, bool) {
	if t == nil {
		return nil, false
	}
	v, ok := t.m[key]
	if ok {
		t.markUsed(key)
	}
	return v, ok
}

// finish moves every key that was not read into Extra.
func (t *table) finish() {
	if t == nil || len(t.used) == len(t.m) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(t.m)) {
		if slices.Contains(t.used, k) {
			continue
		}
		if t.extra != nil {
			t.extra[k] = t.m[k]
			continue
		}
		if t.d.extra == nil {
			t.d.extra = map[string]any{}
		}
		t.d.extra[t.keyPath(k)] = t.m[k]
	}
}

func (t *table) wrongType(key, want string, got any) {
	t.d.errorAt(t.keyPath(key), fmt.Sprintf("%s must be %s, not %s.", t.keyPath(key), want, tomlTypeName(got)))
}

// typed reads key as a T: false when the key is absent, or when it holds
// another type, which is reported as not being want.
func typed[T any](t *table, key, want string) (T, bool) {
	v, ok := t.get(key)
	if !ok {
		var zero T
		return zero, false
	}
	x, ok := v.(T)
	if !ok {
		t.wrongType(key, want, v)
	}
	return x, ok
}

func (t *table) str(key string) string {
	s, _ := typed[string](t, key, "a string")
	return s
}

// strOrInt reads a key Harbor types as str | int (a user name or UID).
func (t *table) strOrInt(key string) string {
	v, ok := t.get(key)
	if !ok {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	t.wrongType(key, "a string or an integer", v)
	return ""
}

// float reads a number that cannot be negative: every number of task.toml
// is a duration, a size, a count or a rate, except min_reward.
func (t *table) float(key string) float64 {
	v, ok := t.get(key)
	if !ok {
		return 0
	}
	f, ok := toFloat(v)
	if !ok {
		t.wrongType(key, "a number", v)
		return 0
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		t.d.errorAt(t.keyPath(key), fmt.Sprintf("%s must be a positive number or 0, not %v.", t.keyPath(key), v))
		return 0
	}
	return f
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	}
	return 0, false
}

func (t *table) int(key string) int64 {
	v, ok := t.get(key)
	if !ok {
		return 0
	}
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case float64:
		// Harbor (pydantic) accepts 2.0 for an int; 2.5 it refuses.
		if v != float64(int64(v)) {
			t.wrongType(key, "an integer", v)
			return 0
		}
		n = int64(v)
	default:
		t.wrongType(key, "an integer", v)
		return 0
	}
	if n < 0 {
		t.d.errorAt(t.keyPath(key), fmt.Sprintf("%s must be a positive integer or 0, not %d.", t.keyPath(key), n))
		return 0
	}
	return n
}

func (t *table) boolean(key string) *bool {
	b, ok := typed[bool](t, key, "true or false")
	if !ok {
		return nil
	}
	return new(b) // allocated only when the key is set
}

func (t *table) strings(key string) []string {
	list, ok := typed[[]any](t, key, "a list of strings")
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			t.d.errorAt(fmt.Sprintf("%s.%d", t.keyPath(key), i), fmt.Sprintf("%s must be a list of strings; element %d is %s.", t.keyPath(key), i, tomlTypeName(e)))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (t *table) stringMap(key string) map[string]string {
	m, ok := typed[map[string]any](t, key, "a table of strings")
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			p := t.keyPath(key) + "." + k
			t.d.errorAt(p, fmt.Sprintf("%s must be a string, not %s.", p, tomlTypeName(m[k])))
			continue
		}
		out[k] = s
	}
	return out
}

// sub returns the sub-table at key, or nil when the key is absent or not a
// table (the latter reported).
func (t *table) sub(key string) *table {
	m, ok := typed[map[string]any](t, key, "a table")
	if !ok {
		return nil
	}
	return t.d.newTable(t.keyPath(key), m)
}

// tables returns the array of tables at key ([[steps]]).
func (t *table) tables(key string) []*table {
	list, ok := typed[[]any](t, key, "an array of tables")
	if !ok {
		return nil
	}
	out := make([]*table, 0, len(list))
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", t.keyPath(key), i)
		m, ok := e.(map[string]any)
		if !ok {
			t.d.errorAt(p, fmt.Sprintf("%s must be a table, not %s.", p, tomlTypeName(e)))
			continue
		}
		out = append(out, t.d.newTable(p, m))
	}
	return out
}

func (d *tomlDecoder) taskConfig(doc map[string]any) *TaskConfig {
	root := d.root(doc)
	cfg := &TaskConfig{
		SchemaVersion:           root.str("schema_version"),
		Version:                 root.str("version"),
		Source:                  root.str("source"),
		MultiStepRewardStrategy: root.str("multi_step_reward_strategy"),
	}
	if cfg.SchemaVersion == "" {
		cfg.SchemaVersion = cfg.Version // Harbor renames the legacy key
	}
	root.oneOf("multi_step_reward_strategy", cfg.MultiStepRewardStrategy, "mean", "final")
	if t := root.sub("task"); t != nil {
		cfg.Task = d.packageInfo(t)
	}
	if m, ok := typed[map[string]any](root, "metadata", "a table"); ok {
		cfg.Metadata = m
	}
	if t := root.sub("agent"); t != nil {
		cfg.Agent = *d.agent(t)
	}
	if t := root.sub("verifier"); t != nil {
		cfg.Verifier = *d.verifier(t)
	}
	if t := root.sub("environment"); t != nil {
		cfg.Environment = *d.environment(t)
	}
	if t := root.sub("solution"); t != nil {
		cfg.Solution.Env = t.stringMap("env")
		t.finish()
	}
	cfg.Artifacts = d.artifacts(root, "artifacts")
	seen := map[string]bool{}
	for _, t := range root.tables("steps") {
		s := d.step(t)
		switch {
		case s.Name == "":
			continue // reported by step
		case seen[s.Name]:
			d.errorAt(t.keyPath("name"), fmt.Sprintf("The step %q is declared twice; step names must be unique.", s.Name))
			continue
		case strings.ContainsAny(s.Name, "/\\") || s.Name == "." || s.Name == "..":
			d.errorAt(t.keyPath("name"), fmt.Sprintf("The step name %q must be a plain folder name under steps/.", s.Name))
			continue
		}
		seen[s.Name] = true
		cfg.Steps = append(cfg.Steps, s)
	}
	root.finish()
	cfg.Extra = d.extra
	return cfg
}

func (d *tomlDecoder) packageInfo(t *table) *PackageInfo {
	p := &PackageInfo{
		Name:        t.str("name"),
		Version:     t.str("version"),
		Description: t.str("description"),
		Keywords:    t.strings("keywords"),
	}
	for _, a := range t.tables("authors") {
		p.Authors = append(p.Authors, Author{Name: a.str("name"), Email: a.str("email")})
		a.finish()
	}
	t.finish()
	return p
}

func (d *tomlDecoder) agent(t *table) *AgentConfig {
	a := &AgentConfig{
		TimeoutSec:   t.float("timeout_sec"),
		User:         t.strOrInt("user"),
		Env:          t.stringMap("env"),
		NetworkMode:  d.networkMode(t, "network_mode"),
		AllowedHosts: t.strings("allowed_hosts"),
	}
	t.finish()
	return a
}

func (d *tomlDecoder) verifier(t *table) *VerifierConfig {
	v := &VerifierConfig{
		TimeoutSec:      t.float("timeout_sec"),
		Env:             t.stringMap("env"),
		User:            t.strOrInt("user"),
		EnvironmentMode: t.str("environment_mode"),
		NetworkMode:     d.networkMode(t, "network_mode"),
		AllowedHosts:    t.strings("allowed_hosts"),
	}
	t.oneOf("environment_mode", v.EnvironmentMode, "shared", "separate")
	if e := t.sub("environment"); e != nil {
		v.Environment = d.environment(e)
		if v.EnvironmentMode == "" {
			v.EnvironmentMode = "separate" // as Harbor does when the section is present
		}
	}
	for _, c := range t.tables("collect") {
		v.Collect = append(v.Collect, CollectHook{
			Command:    c.str("command"),
			Service:    c.str("service"),
			TimeoutSec: c.float("timeout_sec"),
			User:       c.strOrInt("user"),
		})
		c.finish()
	}
	t.finish()
	return v
}

func (d *tomlDecoder) environment(t *table) *EnvConfig {
	e := &EnvConfig{
		DockerImage:     t.str("docker_image"),
		OS:              t.str("os"),
		CPUs:            t.float("cpus"),
		MemoryMB:        t.int("memory_mb"),
		StorageMB:       t.int("storage_mb"),
		GPUs:            int(t.int("gpus")),
		GPUTypes:        t.strings("gpu_types"),
		AllowInternet:   t.boolean("allow_internet"),
		NetworkMode:     d.networkMode(t, "network_mode"),
		AllowedHosts:    t.strings("allowed_hosts"),
		Workdir:         t.str("workdir"),
		SkillsDir:       t.str("skills_dir"),
		Env:             t.stringMap("env"),
		BuildTimeoutSec: t.float("build_timeout_sec"),
	}
	t.oneOf("os", e.OS, "linux", "windows")
	// The legacy size strings win over the _mb keys, as in Harbor.
	if mb, ok := d.legacySize(t, "memory"); ok {
		e.MemoryMB = mb
	}
	if mb, ok := d.legacySize(t, "storage"); ok {
		e.StorageMB = mb
	}
	if tpu := t.sub("tpu"); tpu != nil {
		e.TPU = &TPUConfig{Type: tpu.str("type"), Topology: tpu.str("topology")}
		tpu.finish()
	}
	if h := t.sub("healthcheck"); h != nil {
		e.Healthcheck = d.healthcheck(h)
	}
	for _, s := range t.tables("mcp_servers") {
		e.MCPServers = append(e.MCPServers, s.m)
		for k := range s.m {
			s.markUsed(k)
		}
	}
	t.finish()
	return e
}

func (d *tomlDecoder) healthcheck(t *table) *Healthcheck {
	h := &Healthcheck{
		Command:          t.str("command"),
		IntervalSec:      t.float("interval_sec"),
		TimeoutSec:       t.float("timeout_sec"),
		StartPeriodSec:   t.float("start_period_sec"),
		StartIntervalSec: t.float("start_interval_sec"),
		Retries:          int(t.int("retries")),
	}
	if h.Command == "" {
		if _, ok := t.m["command"]; !ok {
			d.errorAt(t.path, t.path+" needs a command.")
		}
	}
	t.finish()
	return h
}

func (d *tomlDecoder) networkMode(t *table, key string) string {
	s := t.str(key)
	if !t.oneOf(key, s, "public", "no-network", "allowlist") {
		return ""
	}
	return s
}

// oneOf reports the value s read from key unless it is unset ("") or one of
// allowed.
func (t *table) oneOf(key, s string, allowed ...string) bool {
	if s == "" || slices.Contains(allowed, s) {
		return true
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	last := len(quoted) - 1
	list := strings.Join(quoted[:last], ", ") + " or " + quoted[last]
	t.d.errorAt(t.keyPath(key), fmt.Sprintf("%s must be %s, not %q.", t.keyPath(key), list, s))
	return false
}

// legacySize reads Harbor's older `memory = "2G"` form into MiB.
func (d *tomlDecoder) legacySize(t *table, key string) (int64, bool) {
	if _, ok := t.m[key]; !ok {
		return 0, false
	}
	s := t.str(key)
	if s == "" {
		return 0, false
	}
	mb, err := parseSizeMB(s)
	if err != nil {
		d.errorAt(t.keyPath(key), fmt.Sprintf("%s: %v.", t.keyPath(key), err))
		return 0, false
	}
	return mb, true
}

// parseSizeMB parses "2G", "512M", "1024K" (case-insensitive) into MiB the
// way Harbor does.
func parseSizeMB(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var mult float64
	switch {
	case strings.HasSuffix(u, "G"):
		mult = 1024
	case strings.HasSuffix(u, "M"):
		mult = 1
	case strings.HasSuffix(u, "K"):
		mult = 1.0 / 1024
	default:
		return 0, fmt.Errorf("size %q needs a unit: K, M or G, as in \"2G\"", s)
	}
	f, err := strconv.ParseFloat(u[:len(u)-1], 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q is not a number with a unit, as in \"2G\"", s)
	}
	return int64(f * mult), nil
}

func (d *tomlDecoder) artifacts(t *table, key string) []Artifact {
	list, ok := typed[[]any](t, key, "a list")
	if !ok {
		return nil
	}
	var out []Artifact
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", t.keyPath(key), i)
		switch e := e.(type) {
		case string:
			out = append(out, Artifact{Source: e})
		case map[string]any:
			a := d.newTable(p, e)
			out = append(out, Artifact{
				Source:      a.str("source"),
				Destination: a.str("destination"),
				Exclude:     a.strings("exclude"),
				Service:     a.str("service"),
			})
			a.finish()
		default:
			d.errorAt(p, fmt.Sprintf("%s must be a path or a table with a source, not %s.", p, tomlTypeName(e)))
		}
	}
	return out
}

func (d *tomlDecoder) step(t *table) StepConfig {
	s := StepConfig{Name: t.str("name"), Extra: map[string]any{}}
	if s.Name == "" {
		d.errorAt(t.path, t.path+" needs a name: the folder steps/<name>/ that holds the step.")
	}
	if a := t.sub("agent"); a != nil {
		s.Agent = d.agent(a)
	}
	if v := t.sub("verifier"); v != nil {
		s.Verifier = d.verifier(v)
	}
	if h := t.sub("healthcheck"); h != nil {
		s.Healthcheck = d.healthcheck(h)
	}
	s.Artifacts = d.artifacts(t, "artifacts")
	if v, ok := t.get("min_reward"); ok {
		switch v := v.(type) {
		case float64:
			s.MinReward = &v
		case int64:
			f := float64(v)
			s.MinReward = &f
		case map[string]any:
			s.MinRewards = map[string]float64{}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				f, ok := toFloat(v[k])
				if !ok {
					p := t.keyPath("min_reward") + "." + k
					d.errorAt(p, fmt.Sprintf("%s must be a number, not %s.", p, tomlTypeName(v[k])))
					continue
				}
				s.MinRewards[k] = f
			}
		default:
			t.wrongType("min_reward", "a number or a table of numbers", v)
		}
	}
	t.extra = s.Extra
	t.finish()
	if len(s.Extra) == 0 {
		s.Extra = nil
	}
	return s
}

// errorAt records a diagnostic at the value of the dotted key path.
func (d *tomlDecoder) errorAt(keyPath, detail string) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid task.toml",
		Detail:   detail,
		Subject:  d.rangeOf(keyPath).Ptr(),
	})
}

// rangeOf finds where keyPath is written. The index is built only when a
// diagnostic needs it: valid files never pay for it.
func (d *tomlDecoder) rangeOf(keyPath string) hcl.Range {
	if d.ranges == nil {
		d.ranges = keyRanges(d.filename, d.src)
	}
	// A missing path (e.g. an element of an inline array) falls back to its
	// closest written parent.
	for p := keyPath; p != ""; {
		if r, ok := d.ranges[p]; ok {
			return r
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return hcl.Range{Filename: d.filename, Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 1, Column: 1}}
}

// keyRanges maps every dotted key path of a TOML document to the range of
// its value (or of its header, for tables). Elements of arrays of tables are
// numbered from 0 ("steps.1.name"), as are elements of inline arrays.
func keyRanges(filename string, src []byte) map[string]hcl.Range {
	out := map[string]hcl.Range{}
	var p unstable.Parser
	p.Reset(src)
	toRange := func(r unstable.Range) hcl.Range {
		sh := p.Shape(r)
		return hcl.Range{
			Filename: filename,
			Start:    hcl.Pos{Line: sh.Start.Line, Column: sh.Start.Column, Byte: sh.Start.Offset},
			End:      hcl.Pos{Line: sh.End.Line, Column: sh.End.Column, Byte: sh.End.Offset},
		}
	}
	keyOf := func(it unstable.Iterator) (string, unstable.Range) {
		var parts []string
		var first, last unstable.Range
		for it.Next() {
			n := it.Node()
			if len(parts) == 0 {
				first = n.Raw
			}
			last = n.Raw
			parts = append(parts, string(n.Data))
		}
		return strings.Join(parts, "."), unstable.Range{Offset: first.Offset, Length: last.Offset + last.Length - first.Offset}
	}
	arrayCount := map[string]int{}
	var walkValue func(path string, n *unstable.Node)
	walkValue = func(path string, n *unstable.Node) {
		out[path] = toRange(n.Raw)
		switch n.Kind {
		case unstable.Array:
			i := 0
			for it := n.Children(); it.Next(); i++ {
				walkValue(path+"."+strconv.Itoa(i), it.Node())
			}
		case unstable.InlineTable:
			for it := n.Children(); it.Next(); {
				kv := it.Node()
				k, _ := keyOf(kv.Key())
				walkValue(path+"."+k, kv.Value())
			}
		}
	}
	prefix := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			k, r := keyOf(e.Key())
			prefix = resolveArrayPrefix(k, arrayCount, false)
			if _, seen := out[prefix]; !seen {
				out[prefix] = toRange(r)
			}
		case unstable.ArrayTable:
			k, r := keyOf(e.Key())
			prefix = resolveArrayPrefix(k, arrayCount, true)
			out[prefix] = toRange(r)
		case unstable.KeyValue:
			k, _ := keyOf(e.Key())
			if prefix != "" {
				k = prefix + "." + k
			}
			walkValue(k, e.Value())
		}
	}
	return out
}

// resolveArrayPrefix numbers arrays of tables: the n-th [[steps]] is
// "steps.<n-1>", and a [steps.agent] after it is "steps.<n-1>.agent".
func resolveArrayPrefix(key string, counts map[string]int, isArray bool) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, part := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
		last := i == len(parts)-1
		if last && isArray {
			p := b.String()
			n := counts[p]
			counts[p] = n + 1
			// Deeper arrays of tables restart under a new parent element.
			for k := range counts {
				if strings.HasPrefix(k, p+".") {
					delete(counts, k)
				}
			}
			b.WriteString("." + strconv.Itoa(n))
			continue
		}
		if n, ok := counts[b.String()]; ok {
			b.WriteString("." + strconv.Itoa(n-1))
		}
	}
	return b.String()
}

func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalDateTime, toml.LocalTime:
		return "a date or time"
	}
	return fmt.Sprintf("%T", v)
}
