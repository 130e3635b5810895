package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CheckReport is what Check found.
type CheckReport struct {
	Attempts  int `json:"attempts"`
	Addresses int `json:"addresses"`
	Blobs     int `json:"blobs"`
	// Problems are inconsistencies: a record naming a missing blob or
	// attempt, a blob whose content does not match its name, an index
	// entry out of step with the records. Each says what and where.
	Problems []string `json:"problems,omitempty"`
	// OrphanBlobs are blobs no record names, and temporary files a crash
	// left behind: harmless, listed so they can be removed by hand.
	OrphanBlobs []string `json:"orphan_blobs,omitempty"`
	// OrphanLogs are event logs no attempt record names (what restoring
	// an older backup leaves): harmless too.
	OrphanLogs []string `json:"orphan_logs,omitempty"`
}

// ErrNoState is returned by Check for a store folder, or a state.db, that
// does not exist: there is nothing to check.
var ErrNoState = errors.New("no state to check")

// Check reads the whole store and reports inconsistencies. It reads every
// blob to verify its hash, so it takes as long as reading the store once.
//
// It first runs bbolt's consistency check over state.db (every page
// reachable, nothing freed twice, keys in order, every key and value inside
// the file); a state.db that fails it is reported without reading its
// records: the report lists what the check found, and the error is a
// *DamagedError. A state.db damaged beyond reading gives a *DamagedError
// and no report.
func (s *Store) Check() (*CheckReport, error) {
	if _, exists, err := statSize(filepath.Join(s.dir, dbFile)); err != nil {
		return nil, err
	} else if !exists && s.traces() == "" {
		return nil, fmt.Errorf("%s: %w: there is no %s (hemra apply creates it)", s.dir, ErrNoState, dbFile)
	}
	r := &CheckReport{}
	named := map[string]string{} // blob -> first record naming it
	ids := map[string]bool{}     // every attempt id recorded
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	damagedDB := false
	err := s.View(func(v *View) error {
		if v.tx == nil {
			return nil
		}
		if found := verify(v.tx, 50); len(found) > 0 {
			damagedDB = true
			for _, p := range found {
				problem("%s: %s", dbFile, p)
			}
			return nil
		}
		attempts := v.bucket(bucketAttempts)
		history := v.bucket(bucketHistory)
		open := v.bucket(bucketOpen)
		summaries := v.bucket(bucketSummaries)
		lastAt := map[string]string{} // address -> newest attempt id in history
		err := attempts.ForEach(func(k, val []byte) error {
			r.Attempts++
			id := string(k)
			ids[id] = true
			a, err := v.decodeAttempt(id, val)
			if err != nil {
				problem("attempts/%s: %v", id, err)
				return nil
			}
			if a.ID != id {
				problem("attempts/%s: record says id %q", id, a.ID)
			}
			if history.Get(historyKey(a.Address, id)) == nil {
				problem("attempts/%s: missing from the history of %s", id, a.Address)
			}
			if !a.Status().Terminal() && open.Get(k) == nil {
				problem("attempts/%s: status %s but not in the open index", id, a.Status())
			}
			if want, err := json.Marshal(summaryOf(a)); err == nil && !bytes.Equal(summaries.Get(k), want) {
				problem("summaries/%s: missing or out of step with the attempt record", id)
			}
			for _, in := range a.Manifest.Inputs {
				if ValidSHA256(in.Blob) {
					named[in.Blob] = fmt.Sprintf("attempt %s input %s", id, in.Path)
				}
			}
			if a.Outcome != nil && a.Outcome.EventsLog != "" {
				rel := filepath.Clean(filepath.FromSlash(a.Outcome.EventsLog))
				if !filepath.IsLocal(rel) {
					problem("attempts/%s: event log %q lies outside the store", id, a.Outcome.EventsLog)
				} else if _, err := os.Stat(filepath.Join(s.dir, rel)); err != nil {
					problem("attempts/%s (%s): event log %s is missing", id, a.Address, a.Outcome.EventsLog)
				}
			}
			if a.Outcome != nil {
				for _, art := range a.Outcome.Artifacts {
					if !ValidSHA256(art.SHA256) {
						problem("attempts/%s: artifact %s has no valid SHA-256 (%q)", id, art.Path, art.SHA256)
						continue
					}
					named[art.SHA256] = fmt.Sprintf("attempt %s artifact %s", id, art.Path)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		err = history.ForEach(func(k, _ []byte) error {
			addr, id, ok := strings.Cut(string(k), keySep)
			if !ok {
				problem("history/%q: malformed key", k)
				return nil
			}
			if attempts.Get([]byte(id)) == nil {
				problem("history of %s: attempt %s is missing", addr, id)
			}
			if id > lastAt[addr] {
				lastAt[addr] = id
			}
			return nil
		})
		if err != nil {
			return err
		}
		indexed := func(addr string) bool {
			return v.bucket(bucketCurrent).Get([]byte(addr)) != nil || v.bucket(bucketImported).Get([]byte(addr)) != nil
		}
		for _, index := range []Index{IndexCurrent, IndexImported} {
			name := index.bucket()
			err = v.bucket(name).ForEach(func(k, val []byte) error {
				r.Addresses++
				cur, err := decodeCurrent(val)
				if err != nil {
					problem("%s/%s: %v", name, k, err)
					return nil
				}
				if attempts.Get([]byte(cur.AttemptID)) == nil {
					problem("%s/%s: attempt %s is missing", name, k, cur.AttemptID)
				}
				if last := lastAt[string(k)]; last != cur.AttemptID {
					problem("%s/%s: points at %s, but the newest attempt there is %s", name, k, cur.AttemptID, last)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for addr := range lastAt {
			if !indexed(addr) {
				problem("history of %s: no current attempt", addr)
			}
		}
		return v.bucket(bucketRunAttempts).ForEach(func(k, _ []byte) error {
			run, id, _ := strings.Cut(string(k), keySep)
			if v.bucket(bucketRuns).Get([]byte(run)) == nil {
				problem("run %s: missing, but attempt %s names it", run, id)
			}
			if attempts.Get([]byte(id)) == nil {
				problem("run %s: attempt %s is missing", run, id)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if damagedDB {
		sort.Strings(r.Problems)
		return r, damaged(s.dir, fmt.Sprintf("bbolt's consistency check found %d problem(s) (listed above)", len(r.Problems)))
	}

	found := map[string]bool{}
	root := filepath.Join(s.dir, blobsDir, "sha256")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		rel, _ := filepath.Rel(s.dir, path)
		if !ValidSHA256(name) || filepath.Base(filepath.Dir(path)) != name[:2] {
			r.OrphanBlobs = append(r.OrphanBlobs, rel)
			return nil
		}
		r.Blobs++
		found[name] = true
		if sum, err := hashFile(path); err != nil {
			problem("%s: %v", rel, err)
		} else if sum != name {
			problem("%s: content hashes to %s: the blob is corrupt", rel, sum)
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o222 != 0 {
			problem("%s: writable (%s); blobs are read-only", rel, info.Mode().Perm())
		}
		if _, ok := named[name]; !ok {
			r.OrphanBlobs = append(r.OrphanBlobs, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for sha, by := range named {
		if !found[sha] {
			problem("%s names blob %s, which is missing", by, sha)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(s.dir, eventsDir)); err == nil {
		for _, e := range entries {
			// A log is named by its attempt's id, also while the attempt
			// runs and its record does not name it yet.
			id, ok := strings.CutSuffix(e.Name(), ".jsonl")
			if ok && !ids[id] {
				r.OrphanLogs = append(r.OrphanLogs, filepath.Join(eventsDir, e.Name()))
			}
		}
	}
	sort.Strings(r.Problems)
	sort.Strings(r.OrphanBlobs)
	sort.Strings(r.OrphanLogs)
	return r, nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
