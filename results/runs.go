package results

import (
	"time"

	"github.com/hemra-dev/hemra/state"
)

// RunInfo is one apply run (or import) as the run list shows it.
type RunInfo struct {
	state.Run
	// Ran is how many attempts the run recorded so far (Run.Attempts is
	// left empty here: a run may hold 100,000 ids).
	Ran int `json:"ran"`
	// Duration is FinishedAt − StartedAt in seconds; while it runs, the
	// time so far.
	Duration float64 `json:"duration_seconds"`
	// Live says the run is still being written: its status is running and
	// a writer holds the store's lock (a run whose hemra was killed says
	// running until the next apply marks it interrupted, and is not live).
	Live bool `json:"live"`
}

// RunList is every run of a store, newest first, and who writes to the
// store now.
type RunList struct {
	FormatVersion string          `json:"format_version"`
	Store         StoreInfo       `json:"store"`
	Runs          []RunInfo       `json:"runs"`
	Writer        *state.LockInfo `json:"writer,omitempty"`
}

// Writer is who writes to the store now (an apply, an import), nil when
// nobody does: a cheap look at the writer lock, without opening state.db.
// The writer is another process (a reader in the writer's own process
// sees none).
func Writer(store *state.Store) *state.LockInfo {
	if w, ok := store.WriterActive(); ok {
		return w
	}
	return nil
}

// LoadRuns reads every run in one read transaction, newest first.
func LoadRuns(store *state.Store) (*RunList, error) {
	var runs []*state.Run
	var meta state.Meta
	err := store.View(func(v *state.View) error {
		var err error
		if meta, err = v.Meta(); err != nil {
			return err
		}
		runs, err = v.Runs()
		return err
	})
	if err != nil {
		return nil, err
	}
	l := &RunList{FormatVersion: FormatVersion, Runs: make([]RunInfo, 0, len(runs)),
		Store: StoreInfo{Dir: store.Dir(), Lineage: meta.Lineage, Serial: meta.Serial}}
	writer, active := store.WriterActive()
	if active {
		l.Writer = writer
	}
	now := time.Now()
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		info := RunInfo{Run: *r, Ran: len(r.Attempts)}
		info.Attempts = nil
		end := r.FinishedAt
		if r.Status == "running" {
			info.Live = active && writer.PID == r.PID && writer.Host == r.Host
			if end.IsZero() {
				end = now
			}
		}
		if !end.IsZero() && !r.StartedAt.IsZero() {
			info.Duration = end.Sub(r.StartedAt).Seconds()
		}
		l.Runs = append(l.Runs, info)
	}
	return l, nil
}

// Stamp is the store's identity and change counter, read in one short
// transaction: results read earlier with the same lineage and serial are
// still the store's (a reader can keep them instead of reading again).
func Stamp(store *state.Store) (StoreInfo, error) {
	var meta state.Meta
	err := store.View(func(v *state.View) error {
		var err error
		meta, err = v.Meta()
		return err
	})
	return StoreInfo{Dir: store.Dir(), Lineage: meta.Lineage, Serial: meta.Serial}, err
}
