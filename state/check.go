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
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
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
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }

	// The blobs are hashed on one goroutine while the records are read on
	// others: bbolt's consistency check, and the attempts in one id range
	// per CPU, each in a read transaction of its own; the indexes are then
	// walked side by side in one more. Each key of state.db is read once
	// (and once more by the consistency check).
	blobs := make(chan *blobCheck, 1)
	go func() { blobs <- s.checkBlobs() }()
	var (
		damagedDB bool
		wg        sync.WaitGroup
		verifyErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		verifyErr = s.View(func(v *View) error {
			if v.tx == nil {
				return nil
			}
			if found := verify(v.tx, 50); len(found) > 0 {
				damagedDB = true
				for _, p := range found {
					problem("%s: %s", dbFile, p)
				}
			}
			return nil
		})
	}()
	var bounds []string
	if err := s.View(func(v *View) error {
		bounds = v.idBounds(runtime.GOMAXPROCS(0))
		return nil
	}); err != nil {
		wg.Wait()
		<-blobs
		return nil, err
	}
	parts := make([]*attemptCheck, len(bounds)+1)
	errs := make([]error, len(parts))
	for i := range parts {
		var from, to string
		if i > 0 {
			from = bounds[i-1]
		}
		if i < len(bounds) {
			to = bounds[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.View(func(v *View) error {
				if v.tx == nil {
					return nil
				}
				parts[i] = v.checkAttempts(s.dir, from, to)
				return nil
			})
		}()
	}
	wg.Wait()
	blob := <-blobs
	if damagedDB {
		// What the record readers found of a damaged file is not reported.
		sort.Strings(r.Problems)
		return r, damaged(s.dir, fmt.Sprintf("bbolt's consistency check found %d problem(s) (listed above)", len(r.Problems)))
	}
	if err := errors.Join(append(errs, verifyErr)...); err != nil {
		return nil, err
	}
	named := map[string]string{} // blob -> first record naming it
	firstUse := map[string]string{}
	ids := map[string]bool{} // every attempt id recorded
	for _, c := range parts {
		if c == nil {
			continue
		}
		r.Attempts += c.attempts
		r.Problems = append(r.Problems, c.problems...)
		for sha, by := range c.named {
			if _, ok := named[sha]; !ok || by < named[sha] {
				named[sha] = by
			}
		}
		for g, id := range c.firstUse {
			if _, ok := firstUse[g]; !ok {
				firstUse[g] = id
			}
		}
		for id := range c.ids {
			ids[id] = true
		}
	}
	err := s.View(func(v *View) error {
		if v.tx == nil {
			return nil
		}
		v.checkGroups(firstUse, named, problem)
		v.checkIndexes(r, problem)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if blob.err != nil {
		return nil, blob.err
	}
	r.Blobs = blob.count
	r.Problems = append(r.Problems, blob.problems...)
	r.OrphanBlobs = append(r.OrphanBlobs, blob.strays...)
	for name, rel := range blob.found {
		if _, ok := named[name]; !ok {
			r.OrphanBlobs = append(r.OrphanBlobs, rel)
		}
	}
	for sha, by := range named {
		if _, ok := blob.found[sha]; !ok {
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

// blobCheck is what checkBlobs found in blobs/.
type blobCheck struct {
	count    int
	found    map[string]string // sha -> path relative to the store
	strays   []string          // files that are not blobs
	problems []string
	err      error
}

// checkBlobs hashes every blob.
func (s *Store) checkBlobs() *blobCheck {
	c := &blobCheck{found: map[string]string{}}
	root := filepath.Join(s.dir, blobsDir, "sha256")
	c.err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
			c.strays = append(c.strays, rel)
			return nil
		}
		c.count++
		c.found[name] = rel
		if sum, err := hashFile(path); err != nil {
			c.problems = append(c.problems, fmt.Sprintf("%s: %v", rel, err))
		} else if sum != name {
			c.problems = append(c.problems, fmt.Sprintf("%s: content hashes to %s: the blob is corrupt", rel, sum))
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o222 != 0 {
			c.problems = append(c.problems, fmt.Sprintf("%s: writable (%s); blobs are read-only", rel, info.Mode().Perm()))
		}
		return nil
	})
	return c
}

// idBounds splits the attempts into about n ranges of ids by the time in
// their ids (ids sort by creation): n-1 bounds, fewer for a small store.
func (v *View) idBounds(n int) []string {
	b := v.bucket(bucketAttempts)
	if b == nil || n < 2 || b.Stats().KeyN < 4096 {
		return nil
	}
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	t0, ok0 := IDTime(string(first))
	t1, ok1 := IDTime(string(last))
	if !ok0 || !ok1 || !t1.After(t0) {
		return nil
	}
	var out []string
	for i := 1; i < n; i++ {
		out = append(out, IDAt(t0.Add(t1.Sub(t0)*time.Duration(i)/time.Duration(n)), ""))
	}
	return out
}

// attemptCheck is what checkAttempts found in one range of attempts.
type attemptCheck struct {
	attempts int
	problems []string
	named    map[string]string // blob -> first record naming it
	firstUse map[string]string // group -> first attempt naming it
	ids      map[string]bool
}

// checkAttempts checks the attempt records with ids in [from, to) ("":
// open-ended): each against its history, open and summary entries and its
// event log, each group it names present; the blobs its own inputs and
// outcome name (Outcome.EachBlob) are collected.
func (v *View) checkAttempts(storeDir, from, to string) *attemptCheck {
	c := &attemptCheck{named: map[string]string{}, firstUse: map[string]string{}, ids: map[string]bool{}}
	problem := func(format string, args ...any) { c.problems = append(c.problems, fmt.Sprintf(format, args...)) }
	name := func(sha, by string) {
		if _, ok := c.named[sha]; !ok {
			c.named[sha] = by
		}
	}
	attempts := v.bucket(bucketAttempts)
	history := v.bucket(bucketHistory)
	open := v.bucket(bucketOpen)
	summaries := v.bucket(bucketSummaries)
	groups := v.bucket(bucketGroups)
	if attempts == nil {
		return c
	}
	cur := attempts.Cursor()
	var k, val []byte
	if from == "" {
		k, val = cur.First()
	} else {
		k, val = cur.Seek([]byte(from))
	}
	n := 0
	for ; k != nil && (to == "" || string(k) < to); k, val = cur.Next() {
		v.walked(&n)
		c.attempts++
		id := string(k)
		c.ids[id] = true
		// The record alone: its groups are checked once each (checkGroups).
		a, sm, err := decodeStored(id, val)
		if err != nil {
			problem("attempts/%s: %v", id, err)
			continue
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
		refs := sm.InputGroups
		if sm.Context != "" {
			refs = append(refs[:len(refs):len(refs)], sm.Context)
		}
		for _, g := range refs {
			if _, seen := c.firstUse[g]; seen {
				continue
			}
			if groups == nil || groups.Get([]byte(g)) == nil {
				problem("attempts/%s: group %s is missing", id, g)
			}
			c.firstUse[g] = id
		}
		for _, in := range sm.Inputs {
			if ValidSHA256(in.Blob) {
				name(in.Blob, "attempt "+id+" input "+in.Path)
			}
		}
		if a.Outcome != nil && a.Outcome.EventsLog != "" {
			rel := filepath.Clean(filepath.FromSlash(a.Outcome.EventsLog))
			if !filepath.IsLocal(rel) {
				problem("attempts/%s: event log %q lies outside the store", id, a.Outcome.EventsLog)
			} else if _, err := os.Stat(filepath.Join(storeDir, rel)); err != nil {
				problem("attempts/%s (%s): event log %s is missing", id, a.Address, a.Outcome.EventsLog)
			}
		}
		a.Outcome.EachBlob(func(sha, what string) {
			if !ValidSHA256(sha) {
				problem("attempts/%s: %s has no valid SHA-256 (%q)", id, what, sha)
				return
			}
			name(sha, "attempt "+id+" "+what)
		})
	}
	return c
}

// checkGroups reads each group records name once: its content must hash to
// its name, and the blobs its inputs name are collected.
func (v *View) checkGroups(firstUse, named map[string]string, problem func(string, ...any)) {
	groups := v.bucket(bucketGroups)
	if groups == nil {
		return
	}
	_ = groups.ForEach(func(k, val []byte) error {
		by, used := firstUse[string(k)]
		if !used {
			return nil
		}
		if want := groupID(val); want != string(k) {
			problem("groups/%s: content hashes to %s", k, want)
		}
		if !bytes.HasPrefix(val, []byte("[")) {
			return nil // a context group names no blob
		}
		var in []Input
		if err := json.Unmarshal(val, &in); err != nil {
			problem("groups/%s: %v", k, err)
			return nil
		}
		for _, i := range in {
			if _, ok := named[i.Blob]; !ok && ValidSHA256(i.Blob) {
				named[i.Blob] = "attempt " + by + " input " + i.Path
			}
		}
		return nil
	})
}

// checkIndexes walks the history (address, then id order) beside the
// current and imported indexes (address order) and the run index: every
// entry names a recorded attempt, and each address's index entry is its
// newest attempt.
func (v *View) checkIndexes(r *CheckReport, problem func(string, ...any)) {
	attempts := v.bucket(bucketAttempts)
	type index struct {
		name string
		c    *bolt.Cursor
		k, v []byte
	}
	var idx []*index
	for _, i := range []Index{IndexCurrent, IndexImported} {
		if b := v.bucket(i.bucket()); b != nil {
			x := &index{name: string(i.bucket()), c: b.Cursor()}
			x.k, x.v = x.c.First()
			idx = append(idx, x)
		}
	}
	// entry checks one index entry against the newest attempt in the
	// history of its address ("" when it has none).
	entry := func(x *index, last string) {
		r.Addresses++
		k := string(x.k)
		cur, err := decodeCurrent(x.v)
		switch {
		case err != nil:
			problem("%s/%s: %v", x.name, k, err)
		default:
			if attempts.Get([]byte(cur.AttemptID)) == nil {
				problem("%s/%s: attempt %s is missing", x.name, k, cur.AttemptID)
			}
			if last != cur.AttemptID {
				problem("%s/%s: points at %s, but the newest attempt there is %s", x.name, k, cur.AttemptID, last)
			}
		}
		x.k, x.v = x.c.Next()
	}
	// before checks the index entries of the addresses before addr (all:
	// every one left), none of which has a history.
	before := func(addr string, all bool) {
		for _, x := range idx {
			for x.k != nil && (all || string(x.k) < addr) {
				entry(x, "")
			}
		}
	}
	endAddr := func(addr, last string) {
		if addr == "" {
			return
		}
		before(addr, false)
		ok := false
		for _, x := range idx {
			if x.k != nil && string(x.k) == addr {
				entry(x, last)
				ok = true
			}
		}
		if !ok {
			problem("history of %s: no current attempt", addr)
		}
	}
	var addr, last string
	if history := v.bucket(bucketHistory); history != nil {
		_ = history.ForEach(func(k, _ []byte) error {
			a, id, ok := strings.Cut(string(k), keySep)
			if !ok {
				problem("history/%q: malformed key", k)
				return nil
			}
			if attempts.Get([]byte(id)) == nil {
				problem("history of %s: attempt %s is missing", a, id)
			}
			if a != addr {
				endAddr(addr, last)
				addr, last = a, ""
			}
			if id > last {
				last = id
			}
			return nil
		})
	}
	endAddr(addr, last)
	before("", true)
	if ra := v.bucket(bucketRunAttempts); ra != nil {
		runs := v.bucket(bucketRuns)
		_ = ra.ForEach(func(k, _ []byte) error {
			run, id, _ := strings.Cut(string(k), keySep)
			if runs == nil || runs.Get([]byte(run)) == nil {
				problem("run %s: missing, but attempt %s names it", run, id)
			}
			if attempts.Get([]byte(id)) == nil {
				problem("run %s: attempt %s is missing", run, id)
			}
			return nil
		})
	}
}
