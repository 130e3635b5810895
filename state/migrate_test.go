package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// writeV0 builds a store in the prototype format 0: attempts, history and
// runs only, no current or open index.
func writeV0(t *testing.T, dir string, attempts ...*Attempt) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _ := tx.CreateBucket(bucketMeta)
		att, _ := tx.CreateBucket(bucketAttempts)
		hist, _ := tx.CreateBucket(bucketHistory)
		_, _ = tx.CreateBucket(bucketRuns)
		_ = putUint64(meta, keyFormatVersion, 0)
		_ = meta.Put(keyLineage, []byte("old-lineage"))
		_ = putUint64(meta, keySerial, 7)
		for _, a := range attempts {
			v, _ := json.Marshal(a)
			_ = att.Put([]byte(a.ID), v)
			_ = hist.Put(historyKey(a.Address, a.ID), nil)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrateV0(t *testing.T) {
	dir := t.TempDir()
	old := &Attempt{ID: NewID(), Address: "e/h/t#1", Manifest: Manifest{AgentFingerprint: "old"},
		Transitions: []Transition{{Status: StatusFinished}}, Outcome: &Outcome{Class: ClassPassed}}
	newer := &Attempt{ID: NewID(), Address: "e/h/t#1", Manifest: Manifest{AgentFingerprint: "new"},
		Transitions: []Transition{{Status: StatusAgent}}}
	writeV0(t, dir, old, newer)

	// A reader cannot upgrade, and says what to do.
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "format version 0, older") || !strings.Contains(err.Error(), "hemra apply") {
		t.Errorf("reader Open of format 0: %v, want an error saying to run hemra apply", err)
	}

	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatalf("writer Open of format 0: %v", err)
	}
	defer w.Close()
	m, err := w.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m.FormatVersion != FormatVersion || m.Lineage != "old-lineage" || m.Serial != 8 {
		t.Errorf("after the upgrade meta = %+v, want format %d, the old lineage, serial 8", m, FormatVersion)
	}
	cur, ok, err := viewCurrent(w, "e/h/t#1")
	if err != nil || !ok || cur.AttemptID != newer.ID || cur.AgentFingerprint != "new" || cur.Status != StatusAgent {
		t.Errorf("current after the upgrade = %+v, %v, %v; want the newer attempt", cur, ok, err)
	}
	// The open index was built too: the unfinished attempt is recovered.
	if n, err := w.RecoverInterrupted(); n != 1 || err != nil {
		t.Errorf("RecoverInterrupted after the upgrade = %d, %v; want 1", n, err)
	}
	if h, err := w.History("e/h/t#1"); err != nil || len(h) != 2 {
		t.Errorf("history after the upgrade: %d attempts, %v", len(h), err)
	}
	if rep, err := w.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check after the upgrade: %+v, %v", rep, err)
	}
}

func TestFailedMigrationLeavesOldFormat(t *testing.T) {
	dir := t.TempDir()
	writeV0(t, dir, &Attempt{ID: NewID(), Address: "e/h/t#1"})
	// Corrupt one record so the migration fails half-way.
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketAttempts).Put([]byte("zzz"), []byte("{not json")) })
	db.Close()

	if _, err := Open(dir, Options{Writer: true}); err == nil || !strings.Contains(err.Error(), "upgrading state.db from format 0 to 1") {
		t.Fatalf("writer Open with a broken record: %v, want the upgrade error", err)
	}
	db, err = bolt.Open(filepath.Join(dir, dbFile), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		v, _, _ := getUint64(tx.Bucket(bucketMeta), keyFormatVersion)
		if v != 0 || tx.Bucket(bucketCurrent) != nil {
			t.Errorf("a failed upgrade left format %d, current bucket %v; want format 0 untouched", v, tx.Bucket(bucketCurrent) != nil)
		}
		return nil
	})
}

func viewCurrent(s *Store, addr string) (c Current, ok bool, err error) {
	err = s.View(func(v *View) error { c, ok, err = v.Current(addr); return err })
	return c, ok, err
}

func TestIDsSortByCreation(t *testing.T) {
	prev := NewID()
	for range 10000 {
		id := NewID()
		if id <= prev {
			t.Fatalf("id %s made after %s sorts before it", id, prev)
		}
		if !validID(id) {
			t.Fatalf("NewID made %q, which AddAttempt refuses", id)
		}
		prev = id
	}
	if _, ok := IDTime(prev); !ok {
		t.Errorf("IDTime(%s) failed", prev)
	}
}

func TestDecodeCurrentAgreesWithJSON(t *testing.T) {
	cases := []Current{
		{},
		{AttemptID: "06h2sb210c01vmv1mh30", AgentFingerprint: "aa", VerifyFingerprint: "bb", JudgeFingerprint: "cc", Status: StatusFinished, Class: ClassPassed, SnapshotKept: true},
		{AttemptID: "x", Status: StatusAgent},
		{AttemptID: `quote"and\backslash`, AgentFingerprint: "ünïcode <&>", Status: "odd"},
	}
	for _, want := range cases {
		enc, err := encodeCurrent(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCurrent(enc)
		if err != nil || got != want {
			t.Errorf("decodeCurrent(%s) = %+v, %v; want %+v", enc, got, err, want)
		}
	}
	for _, raw := range []string{`{"a":"x","k":false}`, `{ "a" : "x" }`, `{"a":"x","zz":1}`, `{"a":"x",}`, `{"k":"true"}`} {
		var want Current
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := decodeCurrent([]byte(raw))
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("decodeCurrent(%s) = %+v, %v; encoding/json gives %+v, %v", raw, got, err, want, wantErr)
		}
	}
}

func TestEmptyStateFileReadsAsNoState(t *testing.T) {
	dir := t.TempDir()
	// What a writer killed between creating state.db and initialising it
	// leaves behind.
	if err := os.WriteFile(filepath.Join(dir, dbFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reader Open: %v", err)
	}
	if m, err := r.Meta(); err != nil || m != (Meta{}) {
		t.Errorf("Meta = %+v, %v; want no state", m, err)
	}
	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatalf("writer Open: %v", err)
	}
	defer w.Close()
	if m, err := w.Meta(); err != nil || m.Lineage == "" {
		t.Errorf("after a writer opened it, Meta = %+v, %v; want a new state", m, err)
	}
}

// TestMigrateV1 upgrades a v1 store (no summaries, no imported index): the
// summaries of its attempts are built and agree with the records.
func TestMigrateV1(t *testing.T) {
	dir := t.TempDir()
	reward := 0.5
	a := &Attempt{ID: NewID(), Address: "e/h/t#1", Manifest: Manifest{Eval: "e", Harness: "h", Task: "t", Repetition: 1},
		Transitions: []Transition{{Status: StatusFinished}}, Outcome: &Outcome{Class: ClassTaskFailure, Reward: &reward,
			Usage: json.RawMessage(`{"input_tokens":10,"cost_usd":0.5}`)}}
	writeV0(t, dir, a)
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Run the v0 upgrade alone: what a v1 hemra left.
	err = db.Update(func(tx *bolt.Tx) error {
		if err := migrateV0(tx); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketSummaries, bucketImported} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return putUint64(tx.Bucket(bucketMeta), keyFormatVersion, 1)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatalf("writer Open of format 1: %v", err)
	}
	defer w.Close()
	var got Summary
	var ok bool
	err = w.View(func(v *View) error { got, ok, err = v.Summary(a.ID); return err })
	if err != nil || !ok {
		t.Fatalf("summary after the upgrade: %v, %v", ok, err)
	}
	if got.Eval != "e" || got.Reward == nil || *got.Reward != 0.5 || got.Usage == nil || got.Usage.InputTokens != 10 || got.Usage.CostUSD != 0.5 {
		t.Errorf("summary after the upgrade = %+v", got)
	}
	if rep, err := w.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check after the upgrade: %+v, %v", rep, err)
	}
}
