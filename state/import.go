package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Import records runs and attempts made elsewhere, all in one transaction
// (all or none): the attempts of a Harbor job read by `hemra import`
// (each with an Origin, so they go to the imported index and are never
// planned), or the records of a hemra export being restored (as they were
// recorded, in the current index; an address keeps its newer attempt as
// its current one).
//
// Records are stored exactly as given. A run or attempt whose id is
// already recorded with the same content is skipped, so importing the same
// thing twice adds nothing; with other content it is an error. Import
// returns how many attempts it added.
func (s *Store) Import(runs []*Run, attempts []*Attempt) (int, error) {
	type preparedRun struct {
		r   *Run
		rec []byte
	}
	pruns := make([]preparedRun, 0, len(runs))
	for _, r := range runs {
		if !validID(r.ID) {
			return 0, fmt.Errorf("run id %q: only letters, digits, '-' and '_' are allowed", r.ID)
		}
		rec := *r
		rec.Attempts = nil // kept in run_attempts
		val, err := json.Marshal(rec)
		if err != nil {
			return 0, err
		}
		pruns = append(pruns, preparedRun{r, val})
	}
	for _, a := range attempts {
		if a.ID == "" {
			return 0, fmt.Errorf("attempt at %s has no id: imported attempts keep the id they were given", a.Address)
		}
	}
	prep, err := prepareAttempts(attempts)
	if err != nil {
		return 0, err
	}
	added := 0
	err = s.update(func(tx *bolt.Tx) error {
		added = 0
		runsB := tx.Bucket(bucketRuns)
		for _, p := range pruns {
			if old := runsB.Get([]byte(p.r.ID)); old != nil {
				if !bytes.Equal(old, p.rec) {
					return fmt.Errorf("run %s is already recorded with other content", p.r.ID)
				}
				continue
			}
			if err := runsB.Put([]byte(p.r.ID), p.rec); err != nil {
				return err
			}
		}
		for _, p := range prep {
			if old := tx.Bucket(bucketAttempts).Get([]byte(p.a.ID)); old != nil {
				if !bytes.Equal(old, p.rec) {
					return fmt.Errorf("attempt %s (%s) is already recorded with other content: attempts are never overwritten", p.a.ID, p.a.Address)
				}
				continue
			}
			if p.a.RunID != "" && runsB.Get([]byte(p.a.RunID)) == nil {
				return fmt.Errorf("attempt %s names run %s, which is neither recorded nor imported with it", p.a.ID, p.a.RunID)
			}
			// A restored attempt's snapshot lives in the engine of the
			// machine that made it: plan must not count on it here.
			if p.a.Origin == nil && p.a.Outcome != nil && p.a.Outcome.Snapshot != "" {
				c := currentOf(p.a)
				c.SnapshotKept = false
				enc, err := encodeCurrent(c)
				if err != nil {
					return err
				}
				p.cur = enc
			}
			if err := putAttempt(tx, p); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	return added, err
}

// ImportedAttempt is the current attempt at an imported address.
func (v *View) ImportedAttempt(addr string) (*Attempt, error) {
	val := v.get(bucketImported, addr)
	if val == nil {
		return nil, fmt.Errorf("address %q: %w", addr, ErrNotFound)
	}
	cur, err := decodeCurrent(val)
	if err != nil {
		return nil, fmt.Errorf("imported %q: %w", addr, err)
	}
	return v.Attempt(cur.AttemptID)
}

// RestoreEventLog writes an event log made elsewhere (a hemra export) at
// rel, a path relative to the store under events/ as an attempt record
// names it. An existing log with the same content is kept; with other
// content it is an error: event logs are append-only.
func (s *Store) RestoreEventLog(rel string, r io.Reader) error {
	if !s.opts.Writer {
		return ErrReadOnly
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(rel)))
	if clean != rel || !strings.HasPrefix(rel, eventsDir+"/") || strings.Count(rel, "/") != 1 || !strings.HasSuffix(rel, ".jsonl") {
		return fmt.Errorf("event log path %q is not events/<name>.jsonl", rel)
	}
	dst := filepath.Join(s.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if old, err := os.Open(dst); err == nil {
		defer old.Close()
		h2 := sha256.New()
		if _, err := io.Copy(h2, old); err != nil {
			return err
		}
		if !bytes.Equal(h.Sum(nil), h2.Sum(nil)) {
			return fmt.Errorf("%s exists with other content: event logs are never overwritten", rel)
		}
		return nil
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	return os.Link(tmp.Name(), dst) // fails, and keeps dst, if it appeared meanwhile
}
