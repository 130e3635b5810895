package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hemra-dev/hemra/state"
)

// Stages of an attempt, as recorded in state.Input.Stage.
const (
	StageAgent  = "agent"
	StageVerify = "verify"
	StageJudge  = "judge"
)

// ExecutionSemanticsVersion is the default version of what "running an
// attempt" means. It is part of every agent fingerprint: bumping it (a
// change in how hemra runs harnesses that can change outcomes) re-runs
// everything.
const ExecutionSemanticsVersion = "1"

// maxTextBlob is the size under which a UTF-8 file is kept as a blob so a
// later plan can show a unified diff of it.
const maxTextBlob = 256 << 10

// maxLiteral is the longest value recorded literally; longer values are
// recorded as their SHA-256.
const maxLiteral = 256

// Fingerprints are computed in two levels so that a plan over 100,000
// attempts hashes each task and each harness once, not once per attempt:
//
//	group hash  = SHA-256 over "path\x00value\n" of the group's inputs, sorted by path
//	fingerprint = SHA-256 over "hemra-fp/1 <stage>\n" then "<group> <group hash hex>\n"
//	              for each non-empty group in name order
//
// The group of an input follows from its path (see groupOf), so
// Fingerprint can recompute any stage's fingerprint from a manifest's
// inputs alone.

// groupOf says which group an input path belongs to.
func groupOf(path string) string {
	switch {
	case strings.HasPrefix(path, "task."):
		return "task"
	case strings.HasPrefix(path, "attempt."), strings.HasPrefix(path, "hemra."):
		return "attempt"
	case path == chainAgent || path == chainVerify:
		return "chain"
	case strings.HasPrefix(path, "verifier."):
		return "verifier"
	case strings.HasPrefix(path, "judge."):
		return "judge"
	}
	return "harness" // harness.*, sandbox.*, image ..., mount ..., file ...
}

// Inputs that chain a stage to the one before it.
const (
	chainAgent  = "agent.fingerprint"
	chainVerify = "verify.fingerprint"
)

// group is a sorted list of inputs of one stage and one group, with its
// hash computed once.
//
// Task groups are compacted (inputs dropped, hash kept) as soon as they
// are hashed: 20,000 tasks' inputs would otherwise stay in memory for
// attempts that are no-ops. A manifest rebuilds them (planner.taskInputs).
type group struct {
	name   string
	inputs []state.Input
	n      int // len(inputs) before compaction
	sum    [sha256.Size]byte
}

func newGroup(name string, inputs []state.Input) *group {
	slices.SortFunc(inputs, func(a, b state.Input) int { return strings.Compare(a.Path, b.Path) })
	g := &group{name: name, inputs: inputs, n: len(inputs)}
	h := sha256.New()
	var buf []byte
	for _, in := range inputs {
		buf = append(buf[:0], in.Path...)
		buf = append(buf, 0)
		buf = append(buf, in.Value...)
		buf = append(buf, '\n')
		h.Write(buf)
	}
	h.Sum(g.sum[:0])
	return g
}

// fingerprint combines group hashes into a stage fingerprint. groups must
// be sorted by name; empty groups are skipped. It runs three times per
// attempt, so it works in a stack buffer.
func fingerprint(stage string, groups ...*group) fpHex {
	var arr [512]byte
	buf := append(arr[:0], "hemra-fp/1 "...)
	buf = append(buf, stage...)
	buf = append(buf, '\n')
	for _, g := range groups {
		if g == nil || g.n == 0 {
			continue
		}
		buf = append(buf, g.name...)
		buf = append(buf, ' ')
		buf = hex.AppendEncode(buf, g.sum[:])
		buf = append(buf, '\n')
	}
	sum := sha256.Sum256(buf)
	var out fpHex
	hex.Encode(out[:], sum[:])
	return out
}

// fpHex is a fingerprint in hex, held inline so 100,000 attempts' three
// fingerprints are not 300,000 separate strings.
type fpHex [64]byte

func (f *fpHex) String() string { return string(f[:]) }

// equals compares with a recorded fingerprint without allocating.
func (f *fpHex) equals(s string) bool { return string(f[:]) == s }

// chainedFingerprint is fingerprint with a "chain" group holding one input
// (the previous stage's fingerprint) before two other groups, computed
// without building the group: it runs twice per attempt.
func chainedFingerprint(stage, chainPath string, prev *fpHex, g1, g2 *group) fpHex {
	var line [128]byte
	b := append(line[:0], chainPath...)
	b = append(b, 0)
	b = append(b, prev[:]...)
	b = append(b, '\n')
	chain := group{name: "chain", n: 1, sum: sha256.Sum256(b)}
	return fingerprint(stage, &chain, g1, g2)
}

// Fingerprint recomputes a stage's fingerprint from a manifest's inputs
// (all stages may be passed; only stage's are used).
func Fingerprint(stage string, inputs []state.Input) string {
	byGroup := map[string][]state.Input{}
	for _, in := range inputs {
		if in.Stage == stage {
			g := groupOf(in.Path)
			byGroup[g] = append(byGroup[g], in)
		}
	}
	names := make([]string, 0, len(byGroup))
	for n := range byGroup {
		names = append(names, n)
	}
	sort.Strings(names)
	groups := make([]*group, len(names))
	for i, n := range names {
		groups[i] = newGroup(n, append([]state.Input(nil), byGroup[n]...))
	}
	fp := fingerprint(stage, groups...)
	return fp.String()
}

// inputList collects the inputs of one group.
type inputList struct {
	stage  string
	inputs []state.Input
}

// literal records a small value as canonical JSON.
func (l *inputList) literal(path string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(strconv.Quote(err.Error()))
	}
	l.raw(path, string(b))
}

// raw records an already canonical JSON value, hashing it when long.
func (l *inputList) raw(path, value string) {
	if len(value) > maxLiteral {
		value = contentValue([]byte(value))
	}
	l.inputs = append(l.inputs, state.Input{Stage: l.stage, Path: path, Value: value})
}

// file records a file by its content hash; blob marks it as a text file
// whose content is kept for diffs.
func (l *inputList) file(path, sha string, size int64, blob bool) {
	in := state.Input{Stage: l.stage, Path: path, Value: "sha256:" + sha}
	if blob && size < maxTextBlob {
		in.Blob = sha
	}
	l.inputs = append(l.inputs, in)
}

// content records bytes held in memory (an instruction), as a text blob
// when they are small valid UTF-8.
func (l *inputList) content(path string, data []byte) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	l.file(path, sha, int64(len(data)), utf8.Valid(data))
}

func contentValue(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// flatten records a decoded JSON value as one input per leaf: objects are
// walked, arrays and scalars are leaves. Values under a key named "env"
// are environment values written in a task.toml: only their hash is kept.
func (l *inputList) flatten(path string, v any, secret bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			l.flatten(path+"."+k, x[k], secret || k == "env")
		}
	case nil:
	default:
		b, _ := json.Marshal(x)
		if secret {
			l.inputs = append(l.inputs, state.Input{Stage: l.stage, Path: path, Value: contentValue(b)})
			return
		}
		l.raw(path, string(b))
	}
}

// flattenJSON flattens an encoded JSON value (args, a task.toml section).
func (l *inputList) flattenJSON(path string, data []byte, secret bool) {
	if len(data) == 0 {
		return
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		l.raw(path, contentValue(data))
		return
	}
	l.flatten(path, v, secret)
}

// flattenStruct records a decoded task.toml section (a struct of the
// dataset package) one leaf per input, like flatten does for JSON, without
// a JSON round trip: a plan over 20,000 tasks does this 60,000 times.
// Zero values are left out, so an absent key and its zero value agree.
func (l *inputList) flattenStruct(path string, v reflect.Value, secret bool) {
	if !v.IsValid() || v.IsZero() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		l.flattenStruct(path, v.Elem(), secret)
	case reflect.Struct:
		for _, f := range structFields(v.Type()) {
			fv := v.Field(f.index)
			if fv.IsZero() {
				continue
			}
			l.flattenStruct(path+"."+f.name, fv, secret || f.name == "env")
		}
	case reflect.Map:
		if v.Len() == 0 {
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			l.flattenStruct(path+"."+k.String(), v.MapIndex(k), secret || k.String() == "env")
		}
	default:
		value := leafJSON(v)
		if secret {
			value = contentValue([]byte(value))
		}
		l.raw(path, value)
	}
}

type structField struct {
	index int
	name  string // the json name
}

var fieldCache sync.Map // reflect.Type -> []structField

// structFields lists a struct type's exported fields by json name, once
// per type.
func structFields(t reflect.Type) []structField {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]structField)
	}
	var out []structField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, structField{index: i, name: name})
	}
	fieldCache.Store(t, out)
	return out
}

// leafJSON encodes a scalar (or, through encoding/json, a list) as JSON.
func leafJSON(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
				b, _ := json.Marshal(s)
				return string(b)
			}
		}
		return `"` + s + `"`
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		b, _ := json.Marshal(v.Float())
		return string(b)
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return strconv.Quote(err.Error())
	}
	return string(b)
}
