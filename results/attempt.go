package results

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hemra-dev/hemra/state"
)

// Detail is one attempt in full: its record, its figures as the results
// see them, the other attempts of its address, a window of its event log
// with the trajectory built from it, and every file its record names. It
// is what the web view's attempt page renders (and what `hemra show
// ADDRESS` prints).
type Detail struct {
	Attempt *state.Attempt `json:"attempt"`
	Summary *Attempt       `json:"summary"`
	// History is every attempt recorded at the address, oldest first (the
	// last one is the current one).
	History []*Attempt `json:"history"`
	// Current says the attempt is its address's current one.
	Current bool `json:"current"`
	// Events is the window of the event log that was read.
	Events EventWindow `json:"events"`
	// Trajectory is that window as steps: messages, tool calls with their
	// results, MCP calls, logs, usage and hemra's own lines.
	Trajectory []Step `json:"trajectory"`
	// Files are the blobs and logs the record names, each downloadable
	// with OpenFile.
	Files []File `json:"files"`
}

// DetailOptions bound what LoadAttempt reads of an event log.
type DetailOptions struct {
	// From is the first event log line to read (0-based); Last, when set,
	// reads the last Limit lines instead.
	From int
	Last bool
	// Limit is how many lines to read (DefaultEventLimit when 0).
	Limit int
}

// DefaultEventLimit is how many event log lines a Detail holds unless
// asked otherwise.
const DefaultEventLimit = 500

// File is one file an attempt's record names.
type File struct {
	// Kind: artifact, events (the event log), log (a file of the log
	// folders: "agent/…", "verifier/…", "steps/<name>/verifier/…"),
	// stdout and stderr (a task command's output), judge_request,
	// judge_response, reward_details.
	Kind string `json:"kind"`
	// Name is the file's name as the record gives it (an artifact's path in
	// the artifact folder, "judges/<judge>/calls/<n>.request.json", ...):
	// always a relative slash path, never used to open anything.
	Name   string `json:"name"`
	SHA256 string `json:"sha256,omitempty"` // "" for the event log
	Size   int64  `json:"size"`             // -1 when the record does not say
	// Missing: the record names it but the store lacks it.
	Missing bool `json:"missing,omitempty"`
}

// LoadAttempt reads one attempt: ref is an address (its current attempt)
// or an attempt id. The record and its address's history come from one
// read transaction; the event log is read after it, as a file the
// executor appends to (a line being written is left out).
func LoadAttempt(store *state.Store, ref string, opts DetailOptions) (*Detail, error) {
	var a *state.Attempt
	var history []*Attempt
	var current bool
	err := store.View(func(v *state.View) error {
		var err error
		if strings.Contains(ref, "/") {
			a, err = v.CurrentAttempt(ref)
		} else {
			a, err = v.Attempt(ref)
		}
		if err != nil {
			return err
		}
		h, err := v.History(a.Address)
		if err != nil {
			return err
		}
		for _, x := range h {
			s := summaryOf(x)
			history = append(history, attemptOf(&s))
		}
		if len(h) == 0 { // an imported attempt has no history index
			s := summaryOf(a)
			history = []*Attempt{attemptOf(&s)}
		}
		current = history[len(history)-1].ID == a.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := summaryOf(a)
	d := &Detail{Attempt: a, Summary: attemptOf(&s), History: history, Current: current}
	logPath, logRel := eventLogOf(store, a)
	d.Events, err = readEvents(logPath, opts)
	d.Events.Path = logRel
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("attempt %s: event log: %w", a.ID, err)
	}
	d.Trajectory = BuildTrajectory(d.Events.Lines)
	d.Files = filesOf(store, a, logPath, d.Events.Size)
	return d, nil
}

// summaryOf is the attempt's summary as the state writes it.
func summaryOf(a *state.Attempt) state.Summary { return state.SummaryOf(a) }

// eventLogOf is the attempt's event log: the one its outcome names (a
// path relative to the store, checked to stay inside it) or the one the
// store keeps by its id.
func eventLogOf(store *state.Store, a *state.Attempt) (abs, rel string) {
	abs = store.EventLogPath(a.ID)
	if o := a.Outcome; o != nil && o.EventsLog != "" && a.Manifest.ReusedAgentFrom == "" {
		if p := filepath.FromSlash(o.EventsLog); filepath.IsLocal(p) {
			abs = filepath.Join(store.Dir(), p)
		}
	}
	rel = abs
	if r, err := filepath.Rel(store.Dir(), abs); err == nil && filepath.IsLocal(r) {
		rel = filepath.ToSlash(r)
	}
	return abs, rel
}

// filesOf lists every file the record names, in the order a reader meets
// them on the attempt page.
func filesOf(store *state.Store, a *state.Attempt, logPath string, logSize int64) []File {
	var out []File
	add := func(kind, name, sha string, size int64) {
		f := File{Kind: kind, Name: name, SHA256: sha, Size: size}
		if !store.HasBlob(sha) {
			f.Missing = true
		}
		out = append(out, f)
	}
	if st, err := os.Stat(logPath); err == nil && st.Mode().IsRegular() {
		out = append(out, File{Kind: "events", Name: "events.jsonl", Size: st.Size()})
	}
	if o := a.Outcome; o != nil {
		for _, art := range o.Artifacts {
			add("artifact", art.Path, art.SHA256, art.Size)
		}
		for _, c := range o.Commands {
			base := path.Join(c.Stage, c.Step, c.Name)
			if c.Stdout != nil && c.Stdout.SHA256 != "" {
				add("stdout", base+".stdout", c.Stdout.SHA256, c.Stdout.Size)
			}
			if c.Stderr != nil && c.Stderr.SHA256 != "" {
				add("stderr", base+".stderr", c.Stderr.SHA256, c.Stderr.Size)
			}
		}
		for _, l := range o.Logs {
			add("log", l.Path, l.SHA256, l.Size)
		}
		if rd := o.RewardDetails; rd != nil && rd.Blob != "" {
			add("reward_details", "verifier/reward-details.json", rd.Blob, -1)
		}
		for _, name := range sortedKeys(o.Judges) {
			for _, c := range o.Judges[name].Calls {
				base := path.Join("judges", name, "calls", fmt.Sprint(c.Seq))
				if c.RequestBlob != "" {
					add("judge_request", base+".request.json", c.RequestBlob, -1)
				}
				if c.ResponseBlob != "" {
					add("judge_response", base+".response.json", c.ResponseBlob, -1)
				}
			}
		}
	}
	return out
}

// FileBySHA is the file of d with this SHA-256, or the event log for
// "events": the only names OpenFile accepts.
func (d *Detail) FileBySHA(sha string) (File, bool) {
	for _, f := range d.Files {
		if sha == "events" && f.Kind == "events" || sha != "" && f.SHA256 == sha {
			return f, true
		}
	}
	return File{}, false
}

// ReadHead reads the first n bytes of a file of the attempt (as OpenFile
// finds it), and says how big the whole file is.
func ReadHead(store *state.Store, d *Detail, sha string, n int64) ([]byte, int64, error) {
	f, info, err := OpenFile(store, d, sha)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n))
	return b, info.Size, err
}

// OpenFile opens a file of the attempt: one its record names (by its
// SHA-256), or its event log ("events"). Nothing else can be opened, so a
// name taken from a URL never reaches the file system.
func OpenFile(store *state.Store, d *Detail, sha string) (*os.File, File, error) {
	f, ok := d.FileBySHA(sha)
	if !ok {
		return nil, File{}, fmt.Errorf("attempt %s names no file %q: %w", d.Attempt.ID, sha, state.ErrNotFound)
	}
	p := store.BlobPath(f.SHA256)
	if f.Kind == "events" {
		p, _ = eventLogOf(store, d.Attempt)
	}
	if p == "" {
		return nil, File{}, fmt.Errorf("attempt %s: %q: %w", d.Attempt.ID, sha, state.ErrNotFound)
	}
	r, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, File{}, fmt.Errorf("%s %s: %w", f.Kind, f.Name, state.ErrNotFound)
	}
	if err != nil {
		return nil, File{}, err
	}
	st, err := r.Stat()
	if err != nil || !st.Mode().IsRegular() {
		r.Close()
		return nil, File{}, fmt.Errorf("%s %s is not a regular file: %w", f.Kind, f.Name, state.ErrNotFound)
	}
	f.Size = st.Size()
	return r, f, nil
}
