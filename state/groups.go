package state

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Attempt records share most of their manifest: the attempts of one task
// under five harnesses have the same task inputs, the attempts of one
// harness the same harness and sandbox inputs. From format 3 a record keeps
// those parts as references to content-addressed groups (bucketGroups: the
// SHA-256 of a group's JSON → the JSON), each stored once, so state.db
// holds per attempt what is its own: address, fingerprints, the inputs
// chained from the previous stage, transitions and outcome.
//
// The grouping is the store's alone: the Manifest and Attempt types are
// the same in memory as before, and a record decodes to exactly the
// attempt that was written (encodeRecord checks it and keeps a record
// whose inputs it cannot split and join again inline, as in format 2).
//
// An input's group is decided by its stage and path only (inputKind), so a
// group's id changes only when an input of that group does: a planner can
// compare the group ids of two manifests (SplitInputs) and read only the
// groups that differ (View.Group).

// InputGroup is one group of a manifest's inputs: every input of one
// stage and kind, in manifest order, under the SHA-256 (hex) of its JSON.
type InputGroup struct {
	ID     string
	Stage  string
	Kind   string // "attempt", "task" or "run"; "" for inputs kept in the record
	Inputs []Input
}

// inputKind is the group an input belongs to: "" for the inputs chained
// from the previous stage (their value is the attempt's own fingerprint,
// shared with nothing), "attempt" for the repetition and the execution
// semantics, "task" for the task's files and task.toml, "run" for the rest
// (harness, sandbox, images, mounts, verifier, judges).
func inputKind(stage, path string) string {
	switch {
	case path == "agent.fingerprint" || path == "verify.fingerprint":
		return ""
	case strings.HasPrefix(path, "attempt.") || strings.HasPrefix(path, "hemra."):
		return "attempt"
	case strings.HasPrefix(path, "task."):
		return "task"
	}
	return "run"
}

// SplitInputs splits a manifest's inputs into their groups, in the order
// each group first appears, and the inputs kept in the record. Each
// group's ID is set.
func SplitInputs(inputs []Input) (groups []InputGroup, inline []Input) {
	for _, in := range inputs {
		kind := inputKind(in.Stage, in.Path)
		if kind == "" {
			inline = append(inline, in)
			continue
		}
		i := slices.IndexFunc(groups, func(g InputGroup) bool { return g.Stage == in.Stage && g.Kind == kind })
		if i < 0 {
			groups = append(groups, InputGroup{Stage: in.Stage, Kind: kind})
			i = len(groups) - 1
		}
		groups[i].Inputs = append(groups[i].Inputs, in)
	}
	var buf []byte
	for i := range groups {
		buf = appendInputsJSON(buf[:0], groups[i].Inputs)
		groups[i].ID = groupID(buf)
	}
	return groups, inline
}

// GroupRef names one input group of a manifest.
type GroupRef struct {
	ID, Stage, Kind string
}

// InputGroupIDs is SplitInputs without the groups' inputs: their ids,
// stages and kinds, in the same order. InputKind says which inputs are in
// which.
func InputGroupIDs(inputs []Input) []GroupRef {
	// Each group's JSON is hashed as it is written, a few hundred bytes
	// at a time, not kept: a plan explaining 100,000 changes computes
	// the ids of 600,000 groups.
	type acc struct {
		ref GroupRef
		h   hash.Hash
	}
	var groups []acc
	var scratch [512]byte
	for _, in := range inputs {
		kind := inputKind(in.Stage, in.Path)
		if kind == "" {
			continue
		}
		i := -1
		for j := range groups {
			if groups[j].ref.Stage == in.Stage && groups[j].ref.Kind == kind {
				i = j
				break
			}
		}
		buf := scratch[:0]
		if i < 0 {
			groups = append(groups, acc{ref: GroupRef{Stage: in.Stage, Kind: kind}, h: sha256.New()})
			i = len(groups) - 1
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		buf = appendInputJSON(buf, in)
		groups[i].h.Write(buf)
	}
	out := make([]GroupRef, len(groups))
	for i := range groups {
		g := &groups[i]
		g.h.Write([]byte{']'})
		var sum [sha256.Size]byte
		g.ref.ID = base64.RawURLEncoding.EncodeToString(g.h.Sum(sum[:0]))
		out[i] = g.ref
	}
	return out
}

// InputKind is the kind of the group an input is in (GroupRef.Kind), ""
// for an input kept in the record.
func InputKind(in Input) string { return inputKind(in.Stage, in.Path) }

// appendInputsJSON appends the JSON of inputs exactly as json.Marshal
// writes it, without reflection: a plan explaining 100,000 changes
// encodes 300,000 groups.
func appendInputsJSON(buf []byte, inputs []Input) []byte {
	if inputs == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, in := range inputs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendInputJSON(buf, in)
	}
	return append(buf, ']')
}

func appendInputJSON(buf []byte, in Input) []byte {
	buf = append(buf, `{"stage":`...)
	buf = appendJSONString(buf, in.Stage)
	buf = append(buf, `,"path":`...)
	buf = appendJSONString(buf, in.Path)
	buf = append(buf, `,"value":`...)
	buf = appendJSONString(buf, in.Value)
	if in.Blob != "" {
		buf = append(buf, `,"blob":`...)
		buf = appendJSONString(buf, in.Blob)
	}
	return append(buf, '}')
}

// appendJSONString appends s as json.Marshal quotes it: printable ASCII
// other than what it escapes is copied, anything else goes through
// encoding/json.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// groupID names a group by the SHA-256 of its JSON, in unpadded base64url
// (43 characters: a record names several).
func groupID(data []byte) string {
	sum := sha256.Sum256(data)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// joinInputs puts split inputs back in manifest order: stage by stage
// (agent, verify, judge, then any other by name), each stage's inputs by
// path, which is how the planner orders a manifest. ok is false when that
// order is not defined (two inputs of a stage with one path).
func joinInputs(parts [][]Input) ([]Input, bool) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]Input, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	slices.SortStableFunc(out, func(a, b Input) int {
		if a.Stage != b.Stage {
			if ra, rb := stageRank(a.Stage), stageRank(b.Stage); ra != rb {
				return ra - rb
			}
			return strings.Compare(a.Stage, b.Stage)
		}
		return strings.Compare(a.Path, b.Path)
	})
	for i := 1; i < len(out); i++ {
		if out[i].Stage == out[i-1].Stage && out[i].Path == out[i-1].Path {
			return nil, false
		}
	}
	return out, true
}

func stageRank(s string) int {
	switch s {
	case StageAgent:
		return 0
	case StageVerify:
		return 1
	case StageJudge:
		return 2
	}
	return 3
}

// manifestContext is the part of a manifest that attempts of one harness
// share whole: the sandbox record, images and environment names.
type manifestContext struct {
	Sandbox  SandboxRecord     `json:"sandbox"`
	Images   map[string]string `json:"images,omitempty"`
	EnvNames []string          `json:"env_names,omitempty"`
}

// storedManifest is a manifest as a format-3 record holds it: Manifest's
// own fields (Inputs only those kept in the record; Sandbox, Images and
// EnvNames empty when Context is set) and the references.
type storedManifest struct {
	Manifest
	InputGroups []string `json:"input_groups,omitempty"`
	Context     string   `json:"context,omitempty"`
	// Chained: the inputs kept in the record are exactly the planner's
	// two chained ones, whose values are the agent's and the verifier's
	// fingerprints (chainedInputs): they are not written twice.
	Chained bool `json:"chained,omitempty"`
}

// chainedInputs are the inputs a planned manifest chains from one stage to
// the next.
func chainedInputs(m *Manifest) []Input {
	return []Input{
		{Stage: StageVerify, Path: "agent.fingerprint", Value: m.AgentFingerprint},
		{Stage: StageJudge, Path: "verify.fingerprint", Value: m.VerifyFingerprint},
	}
}

// storedAttempt is an attempt record: every field of Attempt, the manifest
// as stored.
type storedAttempt struct {
	*Attempt
	Manifest storedManifest `json:"manifest"`
}

// group is a group to store beside a record.
type group struct {
	id   string
	json []byte // its JSON, packed (packValue) only when the store lacks it
}

// encodeRecord encodes an attempt as its record, in its stored form
// (packValue), and the groups the record references, as JSON: putGroups
// packs those the store lacks (most attempts share most of theirs with
// an earlier one, and a zstd frame costs its encoder's reset to the
// dictionary).
func encodeRecord(a *Attempt) ([]byte, []group, error) {
	m := a.Manifest
	groups, inline := SplitInputs(m.Inputs)
	parts := [][]Input{inline}
	for _, g := range groups {
		parts = append(parts, g.Inputs)
	}
	if joined, ok := joinInputs(parts); !ok || !slices.Equal(joined, m.Inputs) {
		// An order the store cannot restore: kept whole.
		rec, err := json.Marshal(a)
		if err != nil {
			return nil, nil, err
		}
		return packValue(rec), nil, nil
	}
	sm := storedManifest{Manifest: m}
	sm.Inputs = inline
	if slices.Equal(inline, chainedInputs(&m)) {
		sm.Inputs, sm.Chained = nil, true
	}
	var out []group
	for _, g := range groups {
		sm.InputGroups = append(sm.InputGroups, g.ID)
		out = append(out, group{g.ID, appendInputsJSON(nil, g.Inputs)})
	}
	ctx, err := json.Marshal(manifestContext{Sandbox: m.Sandbox, Images: m.Images, EnvNames: m.EnvNames})
	if err != nil {
		return nil, nil, err
	}
	sm.Context = groupID(ctx)
	sm.Sandbox, sm.Images, sm.EnvNames = SandboxRecord{}, nil, nil
	out = append(out, group{sm.Context, ctx})
	rec, err := json.Marshal(storedAttempt{Attempt: a, Manifest: sm})
	if err != nil {
		return nil, nil, err
	}
	return packValue(rec), out, nil
}

// putGroups stores the groups a record references that the store does not
// hold yet.
func putGroups(tx *bolt.Tx, groups []group) error {
	b := tx.Bucket(bucketGroups)
	for _, g := range groups {
		if b.Get([]byte(g.id)) != nil {
			continue
		}
		if err := b.Put([]byte(g.id), packValue(g.json)); err != nil {
			return err
		}
	}
	return nil
}

// groupReader reads groups in one transaction, each decoded once.
type groupReader struct {
	b      *bolt.Bucket
	inputs map[string][]Input
	ctxs   map[string]*manifestContext
}

func newGroupReader(tx *bolt.Tx) *groupReader {
	var b *bolt.Bucket
	if tx != nil {
		b = tx.Bucket(bucketGroups)
	}
	return &groupReader{b: b}
}

func (r *groupReader) raw(id string) ([]byte, error) {
	var v []byte
	if r != nil && r.b != nil {
		v = r.b.Get([]byte(id))
	}
	if v == nil {
		return nil, fmt.Errorf("group %s: %w", id, ErrNotFound)
	}
	data, err := unpackValue(v)
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", id, err)
	}
	return data, nil
}

// Inputs is the input group with this id. The slice is shared: callers
// must not change it.
func (r *groupReader) Inputs(id string) ([]Input, error) {
	// Decoded once per reader: the cache first, before the file.
	if r == nil {
		return nil, fmt.Errorf("group %s: %w", id, ErrNotFound)
	}
	if in, ok := r.inputs[id]; ok {
		return in, nil
	}
	v, err := r.raw(id)
	if err != nil {
		return nil, err
	}
	var in []Input
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, fmt.Errorf("group %s: %w", id, err)
	}
	if r.inputs == nil {
		r.inputs = map[string][]Input{}
	}
	r.inputs[id] = in
	return in, nil
}

func (r *groupReader) context(id string) (*manifestContext, error) {
	if r == nil {
		return nil, fmt.Errorf("group %s: %w", id, ErrNotFound)
	}
	if c, ok := r.ctxs[id]; ok {
		return c, nil
	}
	v, err := r.raw(id)
	if err != nil {
		return nil, err
	}
	c := new(manifestContext)
	if err := json.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("group %s: %w", id, err)
	}
	if r.ctxs == nil {
		r.ctxs = map[string]*manifestContext{}
	}
	r.ctxs[id] = c
	return c, nil
}

// decodeRecord decodes an attempt record of any format, resolving its
// group references through groups.
func decodeRecord(id string, val []byte, groups *groupReader) (*Attempt, error) {
	val, err := unpackValue(val)
	if err != nil {
		return nil, fmt.Errorf("attempt %q: %w", id, err)
	}
	a := new(Attempt)
	sa := storedAttempt{Attempt: a}
	if err := json.Unmarshal(val, &sa); err != nil {
		return nil, fmt.Errorf("attempt %q: %w", id, err)
	}
	sm := sa.Manifest
	a.Manifest = sm.Manifest
	if sm.Chained {
		sm.Inputs = chainedInputs(&sm.Manifest)
		a.Manifest.Inputs = sm.Inputs
	}
	if len(sm.InputGroups) > 0 {
		parts := [][]Input{sm.Inputs}
		for _, gid := range sm.InputGroups {
			in, err := groups.Inputs(gid)
			if err != nil {
				return nil, fmt.Errorf("attempt %q: %w", id, err)
			}
			parts = append(parts, in)
		}
		joined, ok := joinInputs(parts)
		if !ok {
			return nil, fmt.Errorf("attempt %q: its input groups hold one input twice", id)
		}
		a.Manifest.Inputs = joined
	}
	if sm.Context != "" {
		c, err := groups.context(sm.Context)
		if err != nil {
			return nil, fmt.Errorf("attempt %q: %w", id, err)
		}
		a.Manifest.Sandbox = c.Sandbox
		a.Manifest.Images = c.Images
		a.Manifest.EnvNames = c.EnvNames
	}
	return a, nil
}

// RecordGroups is what a record says of its manifest without reading its
// groups: the ids of its input groups, the inputs kept in the record, and
// the id of its context group ("" for a record that keeps everything
// inline, as before format 3).
type RecordGroups struct {
	InputGroups []string
	Inline      []Input
	Context     string
}

// decodeStored decodes a record without reading its groups: the attempt
// with the manifest's own fields only, and the manifest as stored, for
// encodeStored to write back after a change.
func decodeStored(id string, val []byte) (*Attempt, storedManifest, error) {
	val, err := unpackValue(val)
	if err != nil {
		return nil, storedManifest{}, fmt.Errorf("attempt %q: %w", id, err)
	}
	a := new(Attempt)
	sa := storedAttempt{Attempt: a}
	if err := json.Unmarshal(val, &sa); err != nil {
		return nil, storedManifest{}, fmt.Errorf("attempt %q: %w", id, err)
	}
	a.Manifest = sa.Manifest.Manifest
	return a, sa.Manifest, nil
}

// encodeStored encodes an attempt decoded by decodeStored with its
// manifest as it was stored: the manifest's fields are sm's, whatever a
// change did to a.Manifest.
func encodeStored(a *Attempt, sm storedManifest) ([]byte, error) {
	rec, err := json.Marshal(storedAttempt{Attempt: a, Manifest: sm})
	if err != nil {
		return nil, err
	}
	return packValue(rec), nil
}

// RecordGroups reads what the record of attempt id says of its manifest
// without reading its groups. Whole is true for a record that keeps its
// manifest inline (written before format 3, or in an order the store
// cannot restore): read it with Attempt.
func (v *View) RecordGroups(id string) (rg RecordGroups, whole bool, err error) {
	val := v.get(bucketAttempts, id)
	if val == nil {
		return rg, false, fmt.Errorf("attempt %q: %w", id, ErrNotFound)
	}
	val, err = unpackValue(val)
	if err != nil {
		return rg, false, fmt.Errorf("attempt %q: %w", id, err)
	}
	var sa struct {
		Manifest storedManifest `json:"manifest"`
	}
	if err := json.Unmarshal(val, &sa); err != nil {
		return rg, false, fmt.Errorf("attempt %q: %w", id, err)
	}
	sm := sa.Manifest
	if sm.Context == "" {
		return rg, true, nil
	}
	rg = RecordGroups{InputGroups: sm.InputGroups, Inline: sm.Inputs, Context: sm.Context}
	if sm.Chained {
		rg.Inline = chainedInputs(&sm.Manifest)
	}
	return rg, false, nil
}

// InputGroup is the input group with this id, decoded once per view. The
// slice is shared: do not change it.
func (v *View) InputGroup(id string) ([]Input, error) {
	if v.groups == nil {
		v.groups = newGroupReader(v.tx)
	}
	return v.groups.Inputs(id)
}

// ContextSandbox is the sandbox record of the context group with this id
// (RecordGroups.Context), decoded once per view.
func (v *View) ContextSandbox(id string) (SandboxRecord, error) {
	if v.groups == nil {
		v.groups = newGroupReader(v.tx)
	}
	c, err := v.groups.context(id)
	if err != nil {
		return SandboxRecord{}, err
	}
	return c.Sandbox, nil
}
