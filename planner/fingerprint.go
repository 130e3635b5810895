package planner

import (
	"bytes"
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
// everything. 2: Harbor tasks run as Harbor's trial does (the image's
// ENTRYPOINT, WORKDIR and USER, scripts by their shebang, task.toml's env
// tables, users and healthcheck, verifier modes, multi-step tasks).
const ExecutionSemanticsVersion = "2"

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
	case strings.HasPrefix(path, separatePrefix):
		return groupSeparate
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
	n      int        // len(inputs) before compaction
	hex    fpHex      // the hash, in hex as fingerprints list it
	parts  partsCache // stateParts, once computed
}

// setSum records the group's hash.
func (g *group) setSum(sum []byte) { hex.Encode(g.hex[:], sum) }

func newGroup(name string, inputs []state.Input) *group {
	slices.SortFunc(inputs, func(a, b state.Input) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
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
	var sum [sha256.Size]byte
	g.setSum(h.Sum(sum[:0]))
	return g
}

// fingerprint combines group hashes into a stage fingerprint. groups must
// be sorted by name; empty groups are skipped. It runs three times per
// attempt, so it works in a stack buffer.
func fingerprint(stage string, groups ...*group) fpSum {
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
		buf = append(buf, g.hex[:]...)
		buf = append(buf, '\n')
	}
	return sha256.Sum256(buf)
}

// fpHex is a group's hash in hex, as fingerprints list it.
type fpHex [64]byte

// fpSum is a fingerprint, held inline and unencoded so a million
// attempts' three fingerprints are neither 3,000,000 separate strings
// nor 192 bytes each; its String is the hex a manifest records.
type fpSum [sha256.Size]byte

func (f *fpSum) String() string { return hex.EncodeToString(f[:]) }

// appendHex appends the fingerprint in hex.
func (f *fpSum) appendHex(b []byte) []byte { return hex.AppendEncode(b, f[:]) }

// equals compares with a recorded fingerprint without allocating.
func (f *fpSum) equals(s string) bool {
	var h fpHex
	hex.Encode(h[:], f[:])
	return string(h[:]) == s
}

// chainedFingerprint is fingerprint with a "chain" group holding one input
// (the previous stage's fingerprint) before up to three other groups (in
// name order; nil ones skipped), computed without building the group: it
// runs twice per attempt.
func chainedFingerprint(stage, chainPath string, prev *fpSum, g1, g2, g3 *group) fpSum {
	var line [128]byte
	b := append(line[:0], chainPath...)
	b = append(b, 0)
	b = prev.appendHex(b)
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	chain := group{name: "chain", n: 1}
	chain.setSum(sum[:])
	return fingerprint(stage, &chain, g1, g2, g3)
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

// inputList collects the inputs of one group as "path\x00value\n" lines
// in one buffer, the bytes a group hash is computed over: a task's inputs
// are hashed straight from it, and turned into state.Input values (one
// string for the lot) only for a manifest. A plan over 20,000 tasks
// builds 80,000 lists, most of them only to be hashed.
type inputList struct {
	stage string
	buf   []byte
	lines []line
	path  []byte // scratch for flattenValue's paths
}

// line is one input: text is "path\x00value\n" (a slice of a list's
// buffer), the path its first pathLen bytes; blob marks a file whose
// content is kept as a blob (its value is "sha256:<blob>").
type line struct {
	text    []byte
	pathLen int32
	blob    bool
}

func (ln *line) path() []byte  { return ln.text[:ln.pathLen] }
func (ln *line) value() []byte { return ln.text[ln.pathLen+1 : len(ln.text)-1] }

// reset empties the list for reuse, keeping its buffers.
func (l *inputList) reset(stage string) {
	l.stage = stage
	l.buf = l.buf[:0]
	l.lines = l.lines[:0]
}

// begin starts a line: the path and its separator.
func (l *inputList) begin(path string) int {
	start := len(l.buf)
	l.buf = append(l.buf, path...)
	l.buf = append(l.buf, 0)
	return start
}

// beginBytes is begin for a path held in bytes.
func (l *inputList) beginBytes(path []byte) int {
	start := len(l.buf)
	l.buf = append(l.buf, path...)
	l.buf = append(l.buf, 0)
	return start
}

// end finishes the line begun at start, whose value was appended after
// the path. hashValue replaces the value with "sha256:<hex of it>".
func (l *inputList) end(start, pathLen int, hashValue, blob bool) {
	if hashValue {
		vs := start + pathLen + 1
		sum := sha256.Sum256(l.buf[vs:])
		l.buf = append(l.buf[:vs], "sha256:"...)
		l.buf = hex.AppendEncode(l.buf, sum[:])
	}
	l.buf = append(l.buf, '\n')
	// The full slice expression keeps a later append from writing into
	// this line's capacity.
	l.lines = append(l.lines, line{text: l.buf[start:len(l.buf):len(l.buf)], pathLen: int32(pathLen), blob: blob})
}

// add records a value as it is.
func (l *inputList) add(path, value string) {
	start := l.begin(path)
	l.buf = append(l.buf, value...)
	l.end(start, len(path), false, false)
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
	start := l.begin(path)
	l.buf = append(l.buf, value...)
	l.end(start, len(path), len(value) > maxLiteral, false)
}

// file records a file by its content hash; blob marks it as a text file
// whose content is kept for diffs.
func (l *inputList) file(path, sha string, size int64, blob bool) {
	start := l.begin(path)
	l.buf = append(l.buf, "sha256:"...)
	l.buf = append(l.buf, sha...)
	l.end(start, len(path), false, blob && size < maxTextBlob)
}

// content records bytes held in memory (an instruction), as a text blob
// when they are small valid UTF-8.
func (l *inputList) content(path string, data []byte) {
	sum := sha256.Sum256(data)
	start := l.begin(path)
	l.buf = append(l.buf, "sha256:"...)
	l.buf = hex.AppendEncode(l.buf, sum[:])
	l.end(start, len(path), false, utf8.Valid(data) && len(data) < maxTextBlob)
}

func contentValue(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// list returns the inputs in the order they were recorded, their strings
// cut from one allocation.
func (l *inputList) list() []state.Input {
	return inputsOf(l.stage, l.lines)
}

func inputsOf(stage string, lines []line) []state.Input {
	if len(lines) == 0 {
		return nil
	}
	n := 0
	for i := range lines {
		n += len(lines[i].text)
	}
	all := make([]byte, 0, n)
	for i := range lines {
		all = append(all, lines[i].text...)
	}
	s := string(all)
	out := make([]state.Input, len(lines))
	off := 0
	for i := range lines {
		ln := &lines[i]
		t := s[off : off+len(ln.text)]
		off += len(ln.text)
		in := state.Input{Stage: stage, Path: t[:ln.pathLen], Value: t[ln.pathLen+1 : len(t)-1]}
		if ln.blob {
			in.Blob = strings.TrimPrefix(in.Value, "sha256:")
		}
		out[i] = in
	}
	return out
}

// sortLines orders lines as newGroup orders inputs: by path, then value.
func sortLines(lines []line) {
	slices.SortFunc(lines, func(a, b line) int {
		if c := bytes.Compare(a.path(), b.path()); c != 0 {
			return c
		}
		return bytes.Compare(a.value(), b.value())
	})
}

// groupOfLines sorts lines and hashes them as newGroup hashes the same
// inputs; keep also keeps the inputs (for a manifest).
func groupOfLines(name, stage string, lines []line, keep bool) *group {
	sortLines(lines)
	g := &group{name: name, n: len(lines)}
	h := sha256.New()
	for i := range lines {
		h.Write(lines[i].text)
	}
	var sum [sha256.Size]byte
	g.setSum(h.Sum(sum[:0]))
	if keep {
		g.inputs = inputsOf(stage, lines)
	}
	return g
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
			l.add(path, contentValue(b))
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

// flattenValue records a decoded task.toml section (a struct of the
// dataset package) one leaf per input, like flatten does for JSON, without
// a JSON round trip: a plan over 20,000 tasks does this 60,000 times.
// Zero values are left out, so an absent key and its zero value agree.
// Children append their names to path in place, so a path costs no
// allocation.
func (l *inputList) flattenValue(path []byte, v reflect.Value, secret bool) {
	if !v.IsValid() || v.IsZero() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		l.flattenValue(path, v.Elem(), secret)
	case reflect.Struct:
		for _, f := range structFields(v.Type()) {
			fv := v.Field(f.index)
			if fv.IsZero() {
				continue
			}
			sub := append(append(path, '.'), f.name...)
			l.flattenValue(sub, fv, secret || f.name == "env")
		}
	case reflect.Map:
		if v.Len() == 0 {
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			sub := append(append(path, '.'), k.String()...)
			l.flattenValue(sub, v.MapIndex(k), secret || k.String() == "env")
		}
	default:
		start := l.beginBytes(path)
		l.buf = appendLeafJSON(l.buf, v)
		vs := start + len(path) + 1
		l.end(start, len(path), secret || len(l.buf)-vs > maxLiteral, false)
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

// appendLeafJSON appends a scalar (or, through encoding/json, a list)
// encoded as JSON.
func appendLeafJSON(dst []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
				b, _ := json.Marshal(s)
				return append(dst, b...)
			}
		}
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	case reflect.Bool:
		return strconv.AppendBool(dst, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(dst, v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		b, _ := json.Marshal(v.Float())
		return append(dst, b...)
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return strconv.AppendQuote(dst, err.Error())
	}
	return append(dst, b...)
}
