package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/hemra-dev/hemra/dataset"
	"github.com/hemra-dev/hemra/state"
)

// writeBlobs stores the text files a manifest's inputs name as blobs, so a
// later plan can diff them. The content is found by its SHA-256 among the
// task's files, its instruction, and files of the eval directory named by
// the input's path. An input whose content cannot be found any more (the
// file changed since plan) loses its blob reference rather than name a blob
// that is not there; the fingerprint, not the blob, decides what runs.
func (a *attemptRun) writeBlobs(m *state.Manifest) error {
	var inputs []state.Input
	for i, in := range m.Inputs {
		if in.Blob == "" || a.e.blobDone(in.Blob) {
			continue
		}
		if a.e.store.HasBlob(in.Blob) {
			a.e.markBlob(in.Blob)
			continue
		}
		if inputs == nil {
			// Copy before editing: the plan's manifest is shared.
			inputs = append([]state.Input(nil), m.Inputs...)
		}
		data := a.findContent(in)
		if data == nil {
			inputs[i].Blob = ""
			continue
		}
		if _, err := a.e.store.PutBlob(data); err != nil {
			return err
		}
		a.e.markBlob(in.Blob)
	}
	if inputs != nil {
		m.Inputs = inputs
	}
	return nil
}

func (e *executor) blobDone(sha string) bool {
	_, ok := e.blobs.Load(sha)
	return ok
}

func (e *executor) markBlob(sha string) { e.blobs.Store(sha, true) }

// findContent returns the bytes whose SHA-256 is in.Blob, or nil.
func (a *attemptRun) findContent(in state.Input) []byte {
	t := a.j.task
	if sha256Hex(t.Instruction) == in.Blob {
		return t.Instruction
	}
	if t.Dir != "" {
		for _, group := range [][]dataset.File{t.Other, t.Tests, t.Environment, t.Solution} {
			for _, f := range group {
				if f.SHA256 == in.Blob && f.Link == "" {
					if data := readIfHash(filepath.Join(t.Dir, filepath.FromSlash(f.Path)), in.Blob); data != nil {
						return data
					}
				}
			}
		}
		for _, s := range t.Steps {
			if sha256Hex(s.Instruction) == in.Blob {
				return s.Instruction
			}
			for _, f := range s.Files {
				if f.SHA256 == in.Blob && f.Link == "" {
					if data := readIfHash(filepath.Join(t.Dir, filepath.FromSlash(f.Path)), in.Blob); data != nil {
						return data
					}
				}
			}
		}
	}
	// Harness and judge files: the input path ends in a path relative to
	// the eval directory ("harness.files.agent.py", "file harness/x.sh").
	for _, cand := range relCandidates(in.Path) {
		p := filepath.Join(a.e.cfg.Dir, filepath.FromSlash(cand))
		if !strings.HasPrefix(p, a.e.cfg.Dir+string(filepath.Separator)) {
			continue
		}
		if data := readIfHash(p, in.Blob); data != nil {
			return data
		}
	}
	return nil
}

// relCandidates are the suffixes of an input path that may name a file:
// what follows a space, and each dotted suffix.
func relCandidates(p string) []string {
	var out []string
	if _, after, ok := strings.Cut(p, " "); ok {
		out = append(out, after)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '.' && i+1 < len(p) {
			out = append(out, p[i+1:])
		}
	}
	return out
}

func readIfHash(path, sha string) []byte {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 16<<20 {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil || sha256Hex(data) != sha {
		return nil
	}
	return data
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
