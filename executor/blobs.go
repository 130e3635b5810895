package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"os"

	"github.com/hemra-dev/hemra/planner"
	"github.com/hemra-dev/hemra/state"
)

// writeBlobs stores the text files a manifest's inputs name as blobs, so a
// later plan can diff them, reading each from the file the planner says it
// came from (planner.SourceFile). An input whose content cannot be found any more (the
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

// findContent returns the bytes whose SHA-256 is in.Blob, read from the
// file the input came from, or nil when that file no longer holds them.
func (a *attemptRun) findContent(in state.Input) []byte {
	t := a.j.task
	if len(t.Instruction) > 0 && sha256Hex(t.Instruction) == in.Blob {
		return t.Instruction
	}
	src := planner.SourceFile(a.e.cfg, a.j.pa.Eval, a.j.pa.Harness, a.j.pa.Task, in.Path)
	if src == "" {
		return nil
	}
	return readIfHash(src, in.Blob)
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
