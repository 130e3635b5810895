package dataset

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// LoadDir reads every Harbor task directory directly under dir: each
// immediate subfolder holding a task.toml. Hidden folders (".git") and
// folders with neither task.toml nor instruction.md are skipped; a folder
// with instruction.md but no task.toml is reported. Tasks come back sorted by
// name. Diagnostic filenames start with dir.
func LoadDir(dir string, opts LoadOptions) ([]*Task, hcl.Diagnostics) {
	return loadDir(dir, filepath.Clean(dir), opts)
}

// LoadTask reads one Harbor task folder, e.g. for `hemra harness check
// -task DIR`. Its name is the folder's name. Diagnostic filenames start
// with dir as given.
func LoadTask(dir string) (*Task, hcl.Diagnostics) {
	display := filepath.Clean(dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read task folder", Detail: fmt.Sprintf("%s: %v.", display, err)}}
	}
	res := newTaskReader().load(abs, display, filepath.Base(abs))
	if res.task == nil && len(res.diags) == 0 {
		return nil, hcl.Diagnostics{missingFile(display, filepath.Base(abs), "task.toml")}
	}
	return res.task, res.diags
}

// taskResult is one worker's output for one candidate folder.
type taskResult struct {
	task  *Task
	diags hcl.Diagnostics
	// tomlSrc is task.toml's bytes when a diagnostic points into it.
	tomlName string
	tomlSrc  []byte
}

func loadDir(dir, display string, opts LoadOptions) ([]*Task, hcl.Diagnostics) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read dataset folder", Detail: fmt.Sprintf("%s: %v.", display, err)}}
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read dataset folder", Detail: fmt.Sprintf("%s: %v.", display, pathErrReason(err))}}
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			// A task folder may be a link (datasets assembled from
			// others); links inside a task are never followed.
			if fi, err := os.Stat(filepath.Join(abs, name)); err == nil && fi.IsDir() {
				isDir = true
			}
		}
		if isDir {
			names = append(names, name)
		}
	}

	// With the hash cache, task folders whose listing it holds are
	// reached through the dataset folder's descriptor, never opened.
	var base *dirRef
	if opts.HashCache != nil && cacheSupported {
		if d, err := openDir(abs); err == nil {
			defer d.close()
			base = &d
		}
	}
	start := time.Now()
	results := make([]taskResult, len(names))
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newTaskReader()
			r.useCache(opts.HashCache, start)
			r.base = base
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				results[i] = r.load(filepath.Join(abs, names[i]), filepath.Join(display, names[i]), names[i])
			}
		}()
	}
	wg.Wait()

	tasks := make([]*Task, 0, len(names))
	var diags hcl.Diagnostics
	for _, res := range results {
		if res.task != nil {
			tasks = append(tasks, res.task)
		}
		diags = append(diags, res.diags...)
		if opts.Files != nil && res.tomlSrc != nil {
			opts.Files[res.tomlName] = &hcl.File{Bytes: res.tomlSrc}
		}
	}
	return tasks, diags
}

// smallFile is the size up to which a file is read in one go into the
// reader's buffer; bigger files are hashed as a stream.
const smallFile = 256 << 10

// taskReader reads task folders; one per worker, so its buffer is reused
// without locking.
type taskReader struct {
	buf       []byte
	direntBuf []byte // getdents buffer (Linux)
	nameBuf   []byte // NUL-terminated file name for openat (Linux)

	// The hash cache, when used (hashcache.go; the methods below use it): cur is
	// the current task folder's recorded entries, recs what this load
	// found (from the cache or from disk), allHit whether every lookup
	// matched. Files or folders modified at or after notAfter are not
	// recorded (racily clean).
	// walkState is the current task's, reused (load).
	walkState walkState
	// names interns the names and task-relative paths of task files, which
	// repeat from task to task ("tests/test.sh"), up to maxInterned.
	names   map[string]string
	pathBuf []byte

	cache    *HashCache
	notAfter int64
	root     string
	base     *dirRef // the dataset folder, open (nil: none)
	group    cacheGroup
	cur      []cacheEntry
	recs     []cacheEntry
	allHit   bool
}

// useCache makes the reader consult and feed c (nil: no cache). start is
// when the load began.
func (r *taskReader) useCache(c *HashCache, start time.Time) {
	if c == nil || !cacheSupported {
		return
	}
	r.cache = c
	r.notAfter = start.Add(-racyWindow).UnixNano()
}

// beginTask looks up the task folder root in the cache.
func (r *taskReader) beginTask(root string) {
	if r.cache == nil {
		return
	}
	r.root = root
	r.group, r.cur, r.allHit = r.cache.group(root, r.cur, r.intern)
	r.recs = r.recs[:0]
}

// endTask hands what the load found to the cache: the recorded group
// unchanged when everything matched, else a new group.
func (r *taskReader) endTask() {
	if r.cache == nil {
		return
	}
	if r.allHit && len(r.recs) == len(r.cur) {
		r.cache.keep(r.group)
	} else if len(r.recs) > 0 {
		r.cache.add(r.root, encodeGroup(r.root, r.recs))
	}
	r.recs = r.recs[:0]
}

// find returns the recorded entry of rel, or nil.
func (r *taskReader) find(rel string) *cacheEntry {
	i, ok := slices.BinarySearchFunc(r.cur, rel, func(e cacheEntry, rel string) int { return cmp.Compare(e.rel, rel) })
	if !ok {
		return nil
	}
	return &r.cur[i]
}

// settled reports whether a stat is old enough to be recorded.
func (r *taskReader) settled(st *fileStat) bool {
	return st.mtime < r.notAfter && st.ctime < r.notAfter
}

// hit records a valid entry found in the cache.
func (r *taskReader) hit(e *cacheEntry) { r.recs = append(r.recs, *e) }

// miss records an entry read from disk, when its stat has settled.
func (r *taskReader) miss(e cacheEntry) {
	r.allHit = false
	if r.settled(&e.st) {
		r.recs = append(r.recs, e)
	}
}

// cachedDir returns the recorded entries of the folder name in d (rel from
// the task root) when its stat still matches.
func (r *taskReader) cachedDir(d dirRef, name, rel string) ([]dirEntry, bool) {
	e := r.find(rel)
	if e == nil {
		return nil, false
	}
	var st fileStat
	if err := r.statAt(d, name, &st); err != nil || !r.cache.valid(e, kindDir, &st) {
		return nil, false
	}
	r.hit(e)
	return e.dir, true
}

// cachedFile returns the recorded hash (and bytes, when keep) of the
// regular file name in d when its stat still matches. A task.toml
// recorded as its parsed TaskConfig comes back as that, without bytes.
func (r *taskReader) cachedFile(d dirRef, name, rel string, keep bool) (File, []byte, *TaskConfig, bool) {
	e := r.find(rel)
	parsed := keep && rel == "task.toml" && e != nil && e.parsed != nil
	if e == nil || (keep && !e.hasData && !parsed) {
		return File{}, nil, nil, false
	}
	var st fileStat
	if err := r.statAt(d, name, &st); err != nil || !r.cache.valid(e, kindFile, &st) {
		return File{}, nil, nil, false
	}
	var cfg *TaskConfig
	if parsed {
		var ok bool
		if cfg, ok = decodeTaskConfig(e.parsed); !ok {
			return File{}, nil, nil, false
		}
	}
	r.hit(e)
	f := File{SHA256: hex.EncodeToString(e.sha[:]), Size: st.size, Mode: 0o644}
	if st.mode&0o111 != 0 {
		f.Mode = 0o755
	}
	if keep && !parsed {
		// Copied: the task keeps these bytes after the cache is dropped.
		return f, append(make([]byte, 0, len(e.content)), e.content...), nil, true
	}
	return f, nil, cfg, true
}

// rememberParsed records the task.toml just parsed, without diagnostics,
// as its TaskConfig instead of its bytes, when it was recorded with them
// and the encoding carries it exactly.
func (r *taskReader) rememberParsed(cfg *TaskConfig) {
	if r.cache == nil {
		return
	}
	for i := range r.recs {
		e := &r.recs[i]
		if e.rel != "task.toml" || e.kind != kindFile || !e.hasData {
			continue
		}
		if enc, ok := appendTaskConfig(nil, cfg); ok {
			e.parsed, e.content, e.hasData = enc, nil, false
			r.allHit = false // the group is encoded again
		}
		return
	}
}

// rememberFile records a file read from disk.
func (r *taskReader) rememberFile(rel string, st *fileStat, f File, data []byte, keep bool) {
	e := cacheEntry{rel: rel, kind: kindFile, st: *st}
	if n, err := hex.Decode(e.sha[:], []byte(f.SHA256)); err != nil || n != len(e.sha) || f.Size != st.size {
		r.allHit = false
		return
	}
	if keep && len(data) <= maxCachedContent {
		e.content, e.hasData = data, true
	} else if keep {
		// Too big to record with its bytes: read every time. Unchanged,
		// its entry stays as it was.
		if prev := r.find(rel); prev != nil && !prev.hasData && prev.sha == e.sha && r.cache.valid(prev, kindFile, st) {
			r.hit(prev)
			return
		}
	}
	r.miss(e)
}

// rememberDir records a folder listed from disk; st was taken before the
// listing.
func (r *taskReader) rememberDir(rel string, st *fileStat, entries []dirEntry) {
	r.miss(cacheEntry{rel: rel, kind: kindDir, st: *st, dir: entries})
}

// dirEntry is one entry of a task folder; typ holds only the type bits.
type dirEntry struct {
	name string
	typ  fs.FileMode
}

var (
	errNotRegular     = errors.New("not a regular file")
	errNotDir         = errors.New("not a directory")
	errTooManyEntries = errors.New("too many entries")
)

// maxDirentCalls bounds the getdents calls on one folder (each returns up
// to 16 KiB of entries: hundreds of thousands of entries in all).
const maxDirentCalls = 1 << 16

func newTaskReader() *taskReader {
	return &taskReader{buf: make([]byte, smallFile), names: map[string]string{}}
}

// maxInterned bounds the strings a reader interns: a dataset whose tasks
// name their files uniquely allocates them as it would without.
const maxInterned = 4096

// intern returns b as a string, shared with earlier equal ones.
func (r *taskReader) intern(b []byte) string {
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.names) < maxInterned {
		r.names[s] = s
	}
	return s
}

// childPath is rel + "/" + name (name alone at the root), interned.
func (r *taskReader) childPath(rel, name string) string {
	if rel == "" {
		return name
	}
	r.pathBuf = append(append(append(r.pathBuf[:0], rel...), '/'), name...)
	return r.intern(r.pathBuf)
}

// walkState collects one task folder's files while walking it.
type walkState struct {
	display string // task directory as diagnostics name it
	files   []File
	kept    []keptFile // contents of the files the task keeps (task.toml, instructions, Dockerfile)
	// config is task.toml as the hash cache recorded it parsed (then
	// task.toml's bytes are not among kept).
	config *TaskConfig
	diags  hcl.Diagnostics
}

// keptFile is the content of a file whose bytes the task keeps.
type keptFile struct {
	rel  string
	data []byte
}

// content returns a kept file's bytes (nil when absent). A task keeps two
// or three files: a slice beats a map.
func (w *walkState) content(rel string) ([]byte, bool) {
	for _, k := range w.kept {
		if k.rel == rel {
			return k.data, true
		}
	}
	return nil, false
}

// Size limits of the task files whose bytes hemra keeps and parses: a
// larger one is refused at load, before it is read (docs/datasets.md).
const (
	MaxTaskTOML    = 1 << 20  // task.toml
	MaxInstruction = 16 << 20 // instruction.md, and each step's
	MaxDockerfile  = 1 << 20  // environment/Dockerfile
)

// keptLimit is the size limit of a kept file, by its base name.
func keptLimit(name string) int64 {
	switch name {
	case "task.toml":
		return MaxTaskTOML
	case "instruction.md":
		return MaxInstruction
	}
	return MaxDockerfile
}

// tooLargeError is a kept file over its limit.
type tooLargeError struct{ size, limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%d bytes, more than the %d MiB hemra reads for this file (docs/datasets.md, \"Limits\")", e.size, e.limit>>20)
}

// keepContent reports whether a file's bytes are kept on the Task.
func keepContent(rel string) bool {
	if rel == "task.toml" || rel == "instruction.md" || rel == "environment/Dockerfile" {
		return true
	}
	// steps/<name>/instruction.md
	if rest, ok := strings.CutPrefix(rel, "steps/"); ok {
		name, file, ok := strings.Cut(rest, "/")
		return ok && name != "" && file == "instruction.md"
	}
	return false
}

func (r *taskReader) load(dir, display, name string) taskResult {
	r.beginTask(dir)
	defer r.endTask()
	root, entries, cached := r.cachedRoot(dir, name)
	var err error
	if !cached {
		root, err = openDir(dir)
		if err == nil {
			defer root.close()
			entries, err = r.listRoot(root)
		}
	}
	if err != nil {
		return taskResult{diags: hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read task folder",
			Detail:   fmt.Sprintf("%s: %v.", display, pathErrReason(err)),
			Subject:  &hcl.Range{Filename: display},
		}}}
	}
	hasToml, hasInstruction := false, false
	for _, e := range entries {
		switch e.name {
		case "task.toml":
			hasToml = true
		case "instruction.md":
			hasInstruction = true
		}
	}
	if !hasToml {
		if hasInstruction {
			return taskResult{diags: hcl.Diagnostics{missingFile(display, name, "task.toml")}}
		}
		return taskResult{} // not a task folder
	}

	// The walk's buffers are the reader's, reused task after task:
	// nothing the task keeps points into them.
	w := &r.walkState
	*w = walkState{display: display, files: w.files[:0], kept: w.kept[:0]}
	r.walk(w, root, "", entries)

	t := &Task{Name: name, Kind: "harbor", Dir: dir}
	diags := w.diags
	if msg := checkTaskName(name); msg != "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid task name", Detail: msg + ".", Subject: &hcl.Range{Filename: display}})
	}

	res := taskResult{}
	cfg := w.config
	if src, ok := w.content("task.toml"); ok && cfg == nil {
		tomlName := filepath.Join(display, "task.toml")
		var cd hcl.Diagnostics
		cfg, cd = ParseTaskConfig(tomlName, src)
		if len(cd) > 0 {
			res.tomlName, res.tomlSrc = tomlName, src
		} else {
			r.rememberParsed(cfg)
		}
		diags = append(diags, cd...)
	}
	tomlRead := cfg != nil
	if cfg == nil {
		cfg = &TaskConfig{}
	}
	t.Config = cfg
	t.Instruction, _ = w.content("instruction.md")
	t.Dockerfile, _ = w.content("environment/Dockerfile")

	slices.SortFunc(w.files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	lookup := func(rel string) (*File, bool) {
		i, ok := slices.BinarySearchFunc(w.files, rel, func(f File, p string) int { return cmp.Compare(f.Path, p) })
		if !ok {
			return nil, false
		}
		return &w.files[i], true
	}
	var stepFiles map[string][]File
	declared := func(step string) bool {
		return slices.ContainsFunc(cfg.Steps, func(s StepConfig) bool { return s.Name == step })
	}
	var undeclared []string
	// The files of the four roles share one allocation, each role's
	// slice capped at its end (an append by a caller copies).
	const (
		roleEnv = iota
		roleTests
		roleSolution
		roleOther
		roleStep
	)
	roleOf := func(p string) (int, string) {
		switch {
		case strings.HasPrefix(p, "environment/"):
			return roleEnv, ""
		case strings.HasPrefix(p, "tests/"):
			return roleTests, ""
		case strings.HasPrefix(p, "solution/"):
			return roleSolution, ""
		case strings.HasPrefix(p, "steps/") && strings.Count(p, "/") >= 2:
			step := strings.SplitN(p, "/", 3)[1]
			if declared(step) {
				return roleStep, step
			}
			return roleOther, step
		}
		return roleOther, ""
	}
	var counts [roleStep]int
	for i := range w.files {
		if role, _ := roleOf(w.files[i].Path); role < roleStep {
			counts[role]++
		}
	}
	all := make([]File, 0, counts[roleEnv]+counts[roleTests]+counts[roleSolution]+counts[roleOther])
	var start [roleStep]int
	for role := range counts {
		start[role] = len(all)
		all = all[:len(all)+counts[role]]
		counts[role] = 0
	}
	put := func(role int, f File) {
		all[start[role]+counts[role]] = f
		counts[role]++
	}
	for _, f := range w.files {
		switch role, step := roleOf(f.Path); {
		case role == roleStep:
			if stepFiles == nil {
				stepFiles = map[string][]File{}
			}
			stepFiles[step] = append(stepFiles[step], f)
		case step != "":
			if len(undeclared) == 0 || undeclared[len(undeclared)-1] != step {
				undeclared = append(undeclared, step)
			}
			put(role, f)
		default:
			put(role, f)
		}
	}
	of := func(role int) []File {
		if counts[role] == 0 {
			return nil
		}
		return all[start[role] : start[role]+counts[role] : start[role]+counts[role]]
	}
	t.Environment, t.Tests, t.Solution, t.Other = of(roleEnv), of(roleTests), of(roleSolution), of(roleOther)

	windows := cfg.Environment.OS == "windows"
	testScript := "tests/test.sh"
	if windows {
		testScript = "tests/test.bat"
	}
	unreadable := func(rel string) bool {
		want := filepath.Join(display, filepath.FromSlash(rel))
		return slices.ContainsFunc(w.diags, func(d *hcl.Diagnostic) bool { return d.Subject != nil && d.Subject.Filename == want })
	}
	require := func(rel string) bool {
		f, ok := lookup(rel)
		if !ok {
			if !unreadable(rel) { // already reported: too large, unreadable
				diags = append(diags, missingFile(display, name, rel))
			}
			return false
		}
		if f.Link != "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Task file is a symlink",
				Detail:   fmt.Sprintf("%s of task %q is a symbolic link; hemra needs it as a regular file.", rel, name),
				Subject:  &hcl.Range{Filename: filepath.Join(display, filepath.FromSlash(rel))},
			})
			return false
		}
		return true
	}
	require("task.toml")
	switch {
	case !tomlRead:
		// Without its task.toml hemra cannot tell a multi-step task from
		// a single-step one: the TOML error is reported alone.
	case len(cfg.Steps) == 0:
		require("instruction.md")
		require(testScript)
	default:
		for _, sc := range cfg.Steps { // names checked by ParseTaskConfig
			base := "steps/" + sc.Name + "/"
			require(base + "instruction.md")
			// A step's tests override the shared top-level ones.
			if _, ok := lookup(base + testScript); !ok {
				if _, ok := lookup(testScript); !ok {
					diags = append(diags, missingFile(display, name, base+testScript))
				}
			}
			t.Steps = append(t.Steps, Step{Name: sc.Name, Instruction: stepInstruction(w, base), Files: stepFiles[sc.Name]})
		}
	}
	for _, step := range undeclared {
		detail := fmt.Sprintf("Task %q has a folder steps/%s/ but task.toml declares no step %q; its files count as plain task files.", name, step, step)
		if len(cfg.Steps) == 0 {
			detail = fmt.Sprintf("Task %q has a folder steps/%s/ but task.toml declares no [[steps]], so it runs as a single-step task.", name, step)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Undeclared step folder",
			Detail:   detail,
			Subject:  &hcl.Range{Filename: filepath.Join(display, "steps", step)},
		})
	}

	res.task = t
	res.diags = diags
	if diags.HasErrors() {
		// A task with errors is not handed on: the caller stops at the
		// diagnostics anyway, and a half-read task must never be planned.
		res.task = nil
	}
	return res
}

// cachedRoot reaches the task folder name through the dataset folder
// without opening it, when the hash cache holds its listing and its stat
// still matches: one stat instead of open, stat and close per task. A
// folder given as a link is opened as before (its stat is the link's).
func (r *taskReader) cachedRoot(dir, name string) (dirRef, []dirEntry, bool) {
	if r.cache == nil || r.base == nil {
		return dirRef{}, nil, false
	}
	e := r.find("")
	if e == nil {
		return dirRef{}, nil, false
	}
	var st fileStat
	if err := r.statAt(*r.base, name, &st); err != nil || !st.isDir() || !r.cache.valid(e, kindDir, &st) {
		return dirRef{}, nil, false
	}
	r.hit(e)
	root := r.base.unopened(name)
	root.path = dir
	return root, e.dir, true
}

// listRoot lists a task folder, from the hash cache when its stat still
// matches.
func (r *taskReader) listRoot(root dirRef) ([]dirEntry, error) {
	if r.cache == nil {
		return r.list(root)
	}
	var st fileStat
	if err := r.statDir(root, &st); err != nil {
		return r.list(root)
	}
	if e := r.find(""); e != nil && r.cache.valid(e, kindDir, &st) {
		r.hit(e)
		return e.dir, nil
	}
	entries, err := r.list(root)
	if err == nil {
		r.rememberDir("", &st, entries)
	}
	return entries, err
}

func stepInstruction(w *walkState, base string) []byte {
	b, _ := w.content(base + "instruction.md")
	return b
}

func missingFile(display, task, rel string) *hcl.Diagnostic {
	why := "A Harbor task folder needs task.toml, instruction.md and tests/test.sh (solution/solve.sh and environment/ are optional)."
	if strings.HasPrefix(rel, "steps/") {
		why = "Each step declared in [[steps]] needs steps/<name>/instruction.md, and tests/test.sh either in its folder or shared at the top of the task."
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Missing task file",
		Detail:   fmt.Sprintf("Task %q has no %s. %s", task, rel, why),
		Subject:  &hcl.Range{Filename: filepath.Join(display, filepath.FromSlash(rel))},
	}
}

// walk records every entry of one folder of the task, recursively. rel is
// the folder's path relative to the task root ("" for the root).
func (r *taskReader) walk(w *walkState, d dirRef, rel string, entries []dirEntry) {
	for _, e := range entries {
		childRel := r.childPath(rel, e.name)
		switch typ := e.typ; {
		case typ.IsDir():
			if r.cache != nil {
				if subEntries, ok := r.cachedDir(d, e.name, childRel); ok {
					// Not opened: its files are reached through d.
					r.walk(w, d.unopened(e.name), childRel, subEntries)
					continue
				}
			}
			sub, err := r.openSubdir(d, e.name)
			if err != nil {
				w.diags = append(w.diags, fileError(w, childRel, err))
				continue
			}
			var st fileStat
			statted := r.cache != nil && r.statDir(sub, &st) == nil
			subEntries, err := r.list(sub)
			if err != nil {
				sub.close()
				w.diags = append(w.diags, fileError(w, childRel, err))
				continue
			}
			if statted {
				r.rememberDir(childRel, &st, subEntries)
			}
			r.walk(w, sub, childRel, subEntries)
			sub.close()
		case typ&fs.ModeSymlink != 0:
			r.link(w, d, e.name, childRel)
		case typ.IsRegular():
			keep := keepContent(childRel)
			f, data, hit := File{}, []byte(nil), false
			if r.cache != nil {
				var cfg *TaskConfig
				f, data, cfg, hit = r.cachedFile(d, e.name, childRel, keep)
				if cfg != nil {
					w.config = cfg
				}
			}
			if !hit {
				var st fileStat
				var err error
				f, data, err = r.readFileAt(d, e.name, keep, &st)
				if err != nil {
					w.diags = append(w.diags, fileError(w, childRel, err))
					continue
				}
				if r.cache != nil {
					r.rememberFile(childRel, &st, f, data, keep)
				}
			}
			f.Path = childRel
			w.files = append(w.files, f)
			if data != nil {
				w.kept = append(w.kept, keptFile{childRel, data})
			}
		default:
			w.diags = append(w.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported file in task",
				Detail:   fmt.Sprintf("%s is a %s, not a regular file, folder or symlink; remove it from the task.", childRel, fileKind(typ)),
				Subject:  &hcl.Range{Filename: filepath.Join(w.display, filepath.FromSlash(childRel))},
			})
		}
	}
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func fileError(w *walkState, rel string, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Cannot read task file",
		Detail:   fmt.Sprintf("%s: %v.", rel, pathErrReason(err)),
		Subject:  &hcl.Range{Filename: filepath.Join(w.display, filepath.FromSlash(rel))},
	}
}

// link records a symbolic link by its target string, without following it.
// A link that leaves the task folder (absolute, or climbing above the root)
// is refused: the task would depend on files outside itself.
func (r *taskReader) link(w *walkState, d dirRef, name, rel string) {
	target, err := readLinkAt(d, name)
	if err != nil {
		w.diags = append(w.diags, fileError(w, rel, err))
		return
	}
	slashed := filepath.ToSlash(target)
	resolved := path.Join(path.Dir(rel), slashed)
	if filepath.IsAbs(target) || path.IsAbs(slashed) || resolved == ".." || strings.HasPrefix(resolved, "../") {
		w.diags = append(w.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Symlink leaves the task folder",
			Detail:   fmt.Sprintf("%s links to %q, outside the task folder. hemra never follows links out of a task: copy the file into the task instead.", rel, target),
			Subject:  &hcl.Range{Filename: filepath.Join(w.display, filepath.FromSlash(rel))},
		})
		return
	}
	// Hashed with a prefix so a link and a file holding its target string
	// differ (the planner hashes mounted links the same way).
	sum := sha256.Sum256([]byte("symlink:" + target))
	w.files = append(w.files, File{Path: rel, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target)), Mode: ModeSymlink, Link: target})
}
