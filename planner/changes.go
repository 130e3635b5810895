package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hexops/gotextdiff"
	"github.com/hexops/gotextdiff/myers"
	"github.com/hexops/gotextdiff/span"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/state"
)

// maxDiff bounds one unified diff in a plan.
const maxDiff = 32 << 10

// changes lists the inputs of the given stages that differ between a prior
// manifest and the new one, by path, with a unified diff for text files
// whose old content is in the store.
func (p *planner) changes(d *declared, old, new []state.Input, stages map[string]bool) []Change {
	type key struct{ stage, path string }
	oldBy := map[key]state.Input{}
	for _, in := range old {
		if stages[in.Stage] && !isChain(in.Path) {
			oldBy[key{in.Stage, in.Path}] = in
		}
	}
	var out []Change
	for _, in := range new {
		if !stages[in.Stage] || isChain(in.Path) {
			continue
		}
		k := key{in.Stage, in.Path}
		o, had := oldBy[k]
		delete(oldBy, k)
		if had && o.Value == in.Value {
			continue
		}
		c := Change{Stage: in.Stage, Path: in.Path, New: in.Value}
		if had {
			c.Old = o.Value
			if o.Blob != "" && in.Blob != "" {
				c.Diff = p.textDiff(d, in.Path, o.Blob, in.Blob)
			}
		}
		out = append(out, c)
	}
	for _, o := range oldBy {
		out = append(out, Change{Stage: o.Stage, Path: o.Path, Old: o.Value})
	}
	stageOrder := map[string]int{StageAgent: 0, StageVerify: 1, StageJudge: 2}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stage != out[j].Stage {
			return stageOrder[out[i].Stage] < stageOrder[out[j].Stage]
		}
		return out[i].Path < out[j].Path
	})
	if len(out) == 0 && len(stages) > 0 {
		// The fingerprints differ but no recorded input does: the prior
		// attempt was recorded by a hemra that fingerprinted differently.
		out = append(out, Change{Stage: StageAgent, Path: "hemra.fingerprint_scheme", Old: "(earlier)", New: "(current)"})
	}
	return out
}

func isChain(path string) bool { return path == chainAgent || path == chainVerify }

// textDiff renders a unified diff of a changed text file, cached by the
// pair of contents (the same file edit shows in many attempts).
func (p *planner) textDiff(d *declared, inputPath, oldSHA, newSHA string) string {
	key := oldSHA + ":" + newSHA
	p.mu.Lock()
	if p.diffCache == nil {
		p.diffCache = map[string]string{}
	}
	s, ok := p.diffCache[key]
	p.mu.Unlock()
	if ok {
		return s
	}
	oldData, err := p.prior.Blob(oldSHA)
	if err == nil && utf8.Valid(oldData) {
		src := SourceFile(p.cfg, d.eval.Name, d.h.Name, d.task.Name, inputPath)
		newData, err := os.ReadFile(src)
		if err == nil && utf8.Valid(newData) && shaHex(newData) == newSHA {
			s = unifiedDiff(displayName(inputPath), string(oldData), string(newData))
		}
	}
	p.mu.Lock()
	p.diffCache[key] = s
	p.mu.Unlock()
	return s
}

func shaHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// displayName is the file name a diff header shows for an input path.
func displayName(inputPath string) string {
	for _, pre := range []string{"task.", "mount ", "file "} {
		if strings.HasPrefix(inputPath, pre) {
			return strings.TrimPrefix(inputPath[len(pre):], "/")
		}
	}
	return inputPath
}

func unifiedDiff(name, old, new string) string {
	edits := myers.ComputeEdits(span.URIFromPath(name), old, new)
	u := gotextdiff.ToUnified("a/"+name, "b/"+name, old, edits)
	s := fmt.Sprint(u)
	if len(s) > maxDiff {
		cut := strings.LastIndexByte(s[:maxDiff], '\n') + 1
		s = s[:cut] + fmt.Sprintf("... diff truncated (%d more bytes)\n", len(s)-cut)
	}
	return s
}

// SourceFile maps an input path of an attempt's manifest back to the file
// on disk it was read from, or "" for inputs that are not files. The
// executor uses it (through TextBlobs) to store the contents of text
// files, so a later plan can diff them.
func SourceFile(cfg *config.Config, evalName, harnessName, taskName, inputPath string) string {
	e := cfg.Evals[evalName]
	if e == nil {
		return ""
	}
	switch {
	case strings.HasPrefix(inputPath, "task.") && !strings.HasPrefix(inputPath, "task.toml.") && !strings.HasPrefix(inputPath, "task.image "):
		if e.Dataset == nil {
			return ""
		}
		if t := findTask(e.Dataset, taskName); t != nil && t.Dir != "" {
			return filepath.Join(t.Dir, filepath.FromSlash(inputPath[len("task."):]))
		}
	case strings.HasPrefix(inputPath, "file "):
		return filepath.Join(cfg.Dir, filepath.FromSlash(inputPath[len("file "):]))
	case strings.HasPrefix(inputPath, "mount "):
		target := inputPath[len("mount "):]
		for _, h := range e.Harnesses {
			if h.Name != harnessName || h.Sandbox == nil {
				continue
			}
			for _, m := range h.Sandbox.Mounts {
				t := strings.TrimSuffix(m.Target, "/")
				if target == t {
					return m.Source
				}
				if strings.HasPrefix(target, t+"/") {
					return filepath.Join(m.Source, filepath.FromSlash(target[len(t)+1:]))
				}
			}
		}
	case strings.HasPrefix(inputPath, "judge."):
		name, rel, ok := strings.Cut(inputPath[len("judge."):], "/")
		if !ok {
			return ""
		}
		for _, j := range e.Judges {
			if j.Name == name && j.Source != "" {
				dir := j.Source
				if !filepath.IsAbs(dir) {
					dir = filepath.Join(cfg.Dir, filepath.FromSlash(dir))
				}
				return filepath.Join(dir, filepath.FromSlash(rel))
			}
		}
	}
	return ""
}

// TextBlobs lists the text files of an attempt's manifest whose content
// the executor should store as blobs when it records the attempt: a map
// from SHA-256 (hex) to the file on disk. Only files that still hold that
// content and are valid UTF-8 are listed.
func TextBlobs(cfg *config.Config, pa *PlannedAttempt) map[string]string {
	m := pa.NewManifest()
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for _, in := range m.Inputs {
		if in.Blob == "" {
			continue
		}
		if _, done := out[in.Blob]; done {
			continue
		}
		src := SourceFile(cfg, pa.Eval, pa.Harness, pa.Task, in.Path)
		if src == "" {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil || len(data) >= maxTextBlob || !utf8.Valid(data) || shaHex(data) != in.Blob {
			continue
		}
		out[in.Blob] = src
	}
	return out
}
