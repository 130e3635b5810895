package planner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hemra-dev/hemra/state"
)

// Explaining a change against a store (format 3) compares group ids: the
// new manifest's input groups, as the store would split and name them,
// against the ids the prior record lists. Only the groups whose ids differ
// can hold a change, so only they are read, and what they say is the same
// for every attempt whose differing groups are the same: an edit of a
// harness's args changes one group of every attempt of the harness, the
// same group each time, and is worked out once, not 200,000 times.
//
// The new ids come from the planner's groups, each split and hashed once
// (stateParts), not from a manifest built per attempt: a manifest is
// built only where the store keeps the prior record whole, or where the
// groups do not say (two inputs with one path).

// statePart is the part of a planner group that falls in one of the
// store's input groups (state.InputKind), with that part's id as if it
// were the whole of its store group.
type statePart struct {
	stage, kind string
	inputs      []state.Input
	id          string
}

// stateParts splits g's inputs by store group, once per group.
func (g *group) stateParts() []statePart {
	if ps := g.parts.Load(); ps != nil {
		return *ps
	}
	var ps []statePart
	for _, in := range g.inputs {
		kind := state.InputKind(in)
		if kind == "" {
			continue
		}
		i := slices.IndexFunc(ps, func(p statePart) bool { return p.stage == in.Stage && p.kind == kind })
		if i < 0 {
			ps = append(ps, statePart{stage: in.Stage, kind: kind})
			i = len(ps) - 1
		}
		ps[i].inputs = append(ps[i].inputs, in)
	}
	for i := range ps {
		slices.SortStableFunc(ps[i].inputs, byPath)
		ps[i].id = state.InputGroupIDs(ps[i].inputs)[0].ID
	}
	g.parts.Store(&ps)
	return ps
}

func byPath(a, b state.Input) int { return strings.Compare(a.Path, b.Path) }

// newRef is one store group of a new manifest: its ref and the parts of
// planner groups it is made of.
type newRef struct {
	ref   state.GroupRef
	parts []*statePart
}

// newGroupRefs are the store groups of the manifest manifest() builds for
// d from full (its task's full inputs), without building it: the same ids
// as state.InputGroupIDs of its inputs, in an order of their own. ok is
// false where the manifest's order is not defined by path (two inputs of
// a stage with one path): the caller builds the manifest then.
func (p *planner) newGroupRefs(d *declared, full *taskInfo) (refs []newRef, ok bool) {
	groups := [...]*group{
		p.attemptGroup(d.pa.Repetition, p.opts.ExecutionSemanticsVersion), d.hi.group, full.agent,
		d.sep, full.verify, p.verifierGroup(d.eval),
		p.judgeGroup(d.eval).group,
	}
	refs = make([]newRef, 0, 6)
	for _, g := range groups {
		if g == nil {
			continue
		}
		ps := g.stateParts()
		for j := range ps {
			part := &ps[j]
			i := slices.IndexFunc(refs, func(r newRef) bool { return r.ref.Stage == part.stage && r.ref.Kind == part.kind })
			if i < 0 {
				refs = append(refs, newRef{ref: state.GroupRef{ID: part.id, Stage: part.stage, Kind: part.kind}})
				i = len(refs) - 1
			}
			refs[i].parts = append(refs[i].parts, part)
		}
	}
	for i := range refs {
		r := &refs[i]
		if len(r.parts) == 1 {
			if hasDuplicatePath(r.parts[0].inputs) {
				return nil, false
			}
			continue
		}
		in := r.inputs()
		if hasDuplicatePath(in) {
			return nil, false
		}
		r.ref.ID = state.InputGroupIDs(in)[0].ID
	}
	return refs, true
}

// inputs are the group's inputs in manifest order.
func (r *newRef) inputs() []state.Input {
	if len(r.parts) == 1 {
		return r.parts[0].inputs
	}
	var in []state.Input
	for _, part := range r.parts {
		in = append(in, part.inputs...)
	}
	slices.SortStableFunc(in, byPath)
	return in
}

func hasDuplicatePath(in []state.Input) bool {
	for i := 1; i < len(in); i++ {
		if in[i].Path == in[i-1].Path {
			return true
		}
	}
	return false
}

// refsOf are the store groups of a built manifest.
func refsOf(m *state.Manifest) []newRef {
	ids := state.InputGroupIDs(m.Inputs)
	refs := make([]newRef, len(ids))
	for i, g := range ids {
		part := &statePart{stage: g.Stage, kind: g.Kind, id: g.ID}
		for _, in := range m.Inputs {
			if in.Stage == g.Stage && state.InputKind(in) == g.Kind {
				part.inputs = append(part.inputs, in)
			}
		}
		refs[i] = newRef{ref: g, parts: []*statePart{part}}
	}
	return refs
}

// checkGroupRefs makes explainStored compare newGroupRefs with the ids of
// the built manifest wherever it has one (tests set it).
var checkGroupRefs = false

// explanation is what the differing groups of an attempt say: its
// changes, and whether the prior's differing groups hold a separate
// verifier's image input (separateMigration).
type explanation struct {
	changes []Change
	oldSep  bool
}

// cache is a map for explainStored's workers, cleared when it grows past
// cacheMax: keys that differ per task (a file of each task edited, a
// task's own image) would otherwise keep one entry per task, which
// nothing reuses.
type cache[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

const cacheMax = 4096

func (c *cache[V]) get(key []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(key)]
	return v, ok
}

func (c *cache[V]) put(key []byte, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= cacheMax {
		c.m = map[string]V{}
	}
	c.m[string(key)] = v
}

// explainCaches are what explainStored works out once: explanations by
// the stages explained and the differing groups' ids on both sides, and
// the sandbox record of each prior context group by its id.
type explainCaches struct {
	explanations cache[*explanation]
	sandboxes    cache[state.SandboxRecord]
}

// stagesOf are the stages an action's explanation compares.
func stagesOf(a Action) map[string]bool {
	switch a {
	case ActionReverify:
		return map[string]bool{StageVerify: true}
	case ActionRejudge:
		return map[string]bool{StageJudge: true}
	}
	return map[string]bool{StageAgent: true, StageVerify: true, StageJudge: true}
}

// explainStored explains d's change against its prior record in view. m
// is d's manifest when built (nil otherwise), full its task's inputs as
// manifestOf would use them.
func (p *planner) explainStored(view *state.View, d *declared, m *state.Manifest, full map[taskKey]*taskInfo) error {
	pa := &d.pa
	ids, ctx, whole, err := view.RecordRefs(pa.PriorAttemptID)
	if err != nil {
		return err
	}
	if whole {
		old, err := view.Attempt(pa.PriorAttemptID)
		if err != nil {
			return err
		}
		if m == nil {
			m = p.manifestOf(d, full)
		}
		p.explain(d, old.Manifest.Inputs, m.Inputs, old.Manifest.Sandbox, m.Sandbox)
		return nil
	}
	refs, ok := p.newGroupRefs(d, p.fullTask(d, full))
	if !ok {
		if m == nil {
			m = p.manifestOf(d, full)
		}
		refs = refsOf(m)
	} else if checkGroupRefs && m != nil {
		checkRefs(refs, m)
	}

	// The groups that differ, on each side, name the explanation.
	action := pa.Action
	key := append(make([]byte, 0, 128), action...)
	key = append(key, 0)
	for _, id := range ids {
		if !slices.ContainsFunc(refs, func(r newRef) bool { return r.ref.ID == id }) {
			key = append(key, id...)
			key = append(key, ',')
		}
	}
	key = append(key, 0)
	for _, r := range refs {
		if !slices.Contains(ids, r.ref.ID) {
			key = append(key, r.ref.ID...)
			key = append(key, ',')
		}
	}
	e, _ := p.explained.explanations.get(key)
	if e == nil {
		var old, new []state.Input
		for _, id := range ids {
			if slices.ContainsFunc(refs, func(r newRef) bool { return r.ref.ID == id }) {
				continue
			}
			in, err := view.InputGroup(id)
			if err != nil {
				return err
			}
			old = append(old, in...)
		}
		for i := range refs {
			if !slices.Contains(ids, refs[i].ref.ID) {
				new = append(new, refs[i].inputs()...)
			}
		}
		e = &explanation{changes: p.changes(d, old, new, stagesOf(action)), oldSep: hasSeparate(old)}
		p.explained.explanations.put(key, e)
	}
	oldSandbox, ok := p.explained.sandboxes.get([]byte(ctx))
	if !ok {
		if oldSandbox, err = view.ContextSandbox(ctx); err != nil {
			return err
		}
		p.explained.sandboxes.put([]byte(ctx), oldSandbox)
	}
	var newSandbox state.SandboxRecord
	if m != nil {
		newSandbox = m.Sandbox
	} else {
		newSandbox = state.SandboxRecord{Kind: pa.kind, Loosenings: d.iso.loosenings}
	}
	// The changes are shared by every attempt they explain: nothing
	// changes a plan's Changes once made.
	pa.Changes = e.changes
	pa.IsolationChange = isolationChange(e.changes, oldSandbox, newSandbox)
	separateMigration(pa, e.oldSep)
	return nil
}

// explain sets d's changes from whole prior and new inputs.
func (p *planner) explain(d *declared, old, new []state.Input, oldSandbox, newSandbox state.SandboxRecord) {
	pa := &d.pa
	pa.Changes = p.changes(d, old, new, stagesOf(pa.Action))
	pa.IsolationChange = isolationChange(pa.Changes, oldSandbox, newSandbox)
	separateMigration(pa, hasSeparate(old))
}

func hasSeparate(old []state.Input) bool {
	return slices.ContainsFunc(old, func(in state.Input) bool { return strings.HasPrefix(in.Path, separatePrefix) })
}

// checkRefs panics when refs are not the groups of m (checkGroupRefs).
func checkRefs(refs []newRef, m *state.Manifest) {
	want := state.InputGroupIDs(m.Inputs)
	if len(want) != len(refs) {
		panic(fmt.Sprintf("planner: newGroupRefs found %d groups, the manifest of %s/%s/%s has %d", len(refs), m.Eval, m.Harness, m.Task, len(want)))
	}
	for _, w := range want {
		if !slices.ContainsFunc(refs, func(r newRef) bool { return r.ref == w }) {
			panic("planner: newGroupRefs has no group " + w.Stage + "/" + w.Kind + " " + w.ID + " of " + m.Eval + "/" + m.Harness + "/" + m.Task)
		}
	}
}

// partsCache is the field of group stateParts fills.
type partsCache = atomic.Pointer[[]statePart]
