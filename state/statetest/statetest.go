// Package statetest is the conformance suite for hemra's state store: the
// promises SPEC §5 makes about the store, checked through the state API the
// way the planner, the executor and the read commands use it.
package statetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hemra-dev/hemra/state"
)

// Opener opens a store for one test. It registers nothing: the suite closes
// what it opens.
type Opener func(t *testing.T, dir string, opts state.Options) (*state.Store, error)

// Run runs the whole suite against stores made by open.
func Run(t *testing.T, open Opener) {
	s := suite{open: open}
	t.Run("CreatesStoreOwnerOnly", s.createsStoreOwnerOnly)
	t.Run("ExistingFolderKeepsPermissions", s.existingFolderKeepsPermissions)
	t.Run("ReaderOfMissingStoreIsEmpty", s.readerOfMissingStoreIsEmpty)
	t.Run("LineageStableSerialGrows", s.lineageStableSerialGrows)
	t.Run("HistoryIsAppendOnly", s.historyIsAppendOnly)
	t.Run("CurrentPointerMoves", s.currentPointerMoves)
	t.Run("TransitionsInOrder", s.transitionsInOrder)
	t.Run("EndedAttemptTakesNoTransition", s.endedAttemptTakesNoTransition)
	t.Run("SnapshotKept", s.snapshotKept)
	t.Run("Runs", s.runs)
	t.Run("Blobs", s.blobs)
	t.Run("SecondWriterRefused", s.secondWriterRefused)
	t.Run("LockTimeoutWaitsThenSucceeds", s.lockTimeoutWaitsThenSucceeds)
	t.Run("LockTimeoutGivesUp", s.lockTimeoutGivesUp)
	t.Run("ReaderWhileWriterHoldsLock", s.readerWhileWriterHoldsLock)
	t.Run("ReadersDuringBusyWrites", s.readersDuringBusyWrites)
	t.Run("ReaderCannotWrite", s.readerCannotWrite)
	t.Run("RecoverInterrupted", s.recoverInterrupted)
	t.Run("ValuesCopiedOut", s.valuesCopiedOut)
	t.Run("NewerFormatRefused", s.newerFormatRefused)
	t.Run("BadInputRefused", s.badInputRefused)
	t.Run("CheckFindsInconsistencies", s.checkFindsInconsistencies)
	t.Run("CheckFindsMissingEventLog", s.checkFindsMissingEventLog)
	t.Run("CheckOfMissingStore", s.checkOfMissingStore)
	t.Run("DamagedFileReported", s.damagedFileReported)
	t.Run("BackupOnClose", s.backupOnClose)
	t.Run("BulkAdd", s.bulkAdd)
}

type suite struct{ open Opener }

func (s suite) writer(t *testing.T, dir string) *state.Store {
	t.Helper()
	st, err := s.open(t, dir, state.Options{Writer: true, Command: "hemra apply"})
	if err != nil {
		t.Fatalf("opening the writer: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (s suite) reader(t *testing.T, dir string) *state.Store {
	t.Helper()
	st, err := s.open(t, dir, state.Options{})
	if err != nil {
		t.Fatalf("opening a reader: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Attempt is a pending attempt at addr with the given agent fingerprint.
func Attempt(addr, agentFP string) *state.Attempt {
	eval, rest, _ := strings.Cut(addr, "/")
	harness, task, _ := strings.Cut(rest, "/")
	return &state.Attempt{
		Address: addr,
		Manifest: state.Manifest{
			FormatVersion:     1,
			Eval:              eval,
			Harness:           harness,
			Task:              task,
			Repetition:        1,
			AgentFingerprint:  agentFP,
			VerifyFingerprint: "verify-" + agentFP,
			JudgeFingerprint:  "judge-" + agentFP,
			Inputs:            []state.Input{{Stage: "agent", Path: "harness.args.model", Value: "m"}},
			EnvNames:          []string{"OPENAI_API_KEY"},
		},
	}
}

func mustAdd(t *testing.T, st *state.Store, a *state.Attempt) {
	t.Helper()
	if err := st.AddAttempt(a); err != nil {
		t.Fatalf("AddAttempt(%s): %v", a.Address, err)
	}
}

func mustMeta(t *testing.T, st *state.Store) state.Meta {
	t.Helper()
	m, err := st.Meta()
	if err != nil {
		t.Fatalf("Meta: %v", err)
	}
	return m
}

func (s suite) createsStoreOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", ".hemra")
	s.writer(t, dir)
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("a new store folder has mode %v, want 0700", got)
	}
	for _, name := range []string{"state.db", "writer.lock"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("a writer left no %s: %v", name, err)
		}
	}
}

func (s suite) existingFolderKeepsPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil { // whatever the umask
		t.Fatal(err)
	}
	mustAdd(t, s.writer(t, dir), Attempt("e/h/t#1", "fp"))
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o750 {
		t.Errorf("an existing store folder changed to %v, want it left at 0750", got)
	}
}

func (s suite) readerOfMissingStoreIsEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".hemra")
	r := s.reader(t, dir)
	if m := mustMeta(t, r); m != (state.Meta{}) {
		t.Errorf("Meta of a missing store = %+v, want zero", m)
	}
	n := 0
	if err := r.ForEachCurrent(func(string, state.Current) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("ForEachCurrent of a missing store: %d entries, %v", n, err)
	}
	if _, err := r.CurrentAttempt("e/h/t#1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("CurrentAttempt of a missing store: %v, want ErrNotFound", err)
	}
	if runs, err := r.Runs(); err != nil || len(runs) != 0 {
		t.Errorf("Runs of a missing store: %v, %v", runs, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a reader created the store folder (%v)", err)
	}
}

func (s suite) lineageStableSerialGrows(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	m0 := mustMeta(t, w)
	if m0.Lineage == "" || m0.FormatVersion != state.FormatVersion {
		t.Fatalf("new store meta = %+v, want a lineage and format %d", m0, state.FormatVersion)
	}
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	m1 := mustMeta(t, w)
	if m1.Serial <= m0.Serial {
		t.Errorf("serial %d after AddAttempt, was %d: want it to grow", m1.Serial, m0.Serial)
	}
	if err := w.Transition(a.ID, state.Transition{Status: state.StatusAgent}); err != nil {
		t.Fatal(err)
	}
	m2 := mustMeta(t, w)
	if m2.Serial <= m1.Serial {
		t.Errorf("serial %d after Transition, was %d: want it to grow", m2.Serial, m1.Serial)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening again, as reader or writer, changes neither.
	if m := mustMeta(t, s.reader(t, dir)); m != m2 {
		t.Errorf("reader sees %+v, want %+v", m, m2)
	}
	w2 := s.writer(t, dir)
	if m := mustMeta(t, w2); m != m2 {
		t.Errorf("after reopening the writer, meta = %+v, want %+v unchanged", m, m2)
	}
	if other := mustMeta(t, s.writer(t, t.TempDir())); other.Lineage == m0.Lineage {
		t.Errorf("two stores share lineage %s", other.Lineage)
	}
}

func (s suite) historyIsAppendOnly(t *testing.T) {
	w := s.writer(t, t.TempDir())
	first, second := Attempt("e/h/t#1", "fp1"), Attempt("e/h/t#1", "fp2")
	other := Attempt("e/h/t#2", "fp1")
	mustAdd(t, w, first)
	mustAdd(t, w, other)
	mustAdd(t, w, second)
	h, err := w.History("e/h/t#1")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].ID != first.ID || h[1].ID != second.ID {
		t.Fatalf("History = %v, want [%s %s] oldest first", ids(h), first.ID, second.ID)
	}
	old, err := w.Attempt(first.ID)
	if err != nil || old.Manifest.AgentFingerprint != "fp1" {
		t.Errorf("the replaced attempt is no longer readable as recorded: %v, %v", old, err)
	}
	dup := Attempt("e/h/t#1", "fp3")
	dup.ID = first.ID
	if err := w.AddAttempt(dup); err == nil {
		t.Errorf("AddAttempt with a recorded id succeeded; attempts must never be overwritten")
	}
	if a, _ := w.Attempt(first.ID); a.Manifest.AgentFingerprint != "fp1" {
		t.Errorf("a refused AddAttempt changed the recorded attempt")
	}
	if h, _ := w.History("e/h/t"); len(h) != 0 {
		t.Errorf("History of a prefix of an address = %v, want none", ids(h))
	}
}

func ids(as []*state.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func currents(t *testing.T, st *state.Store) map[string]state.Current {
	t.Helper()
	m := map[string]state.Current{}
	var order []string
	err := st.ForEachCurrent(func(addr string, c state.Current) error {
		m[addr] = c
		order = append(order, addr)
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachCurrent: %v", err)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("ForEachCurrent not in address order: %q before %q", order[i-1], order[i])
		}
	}
	return m
}

func (s suite) currentPointerMoves(t *testing.T) {
	w := s.writer(t, t.TempDir())
	a1, b := Attempt("e/h/a#1", "fpa"), Attempt("e/h/b#1", "fpb")
	mustAdd(t, w, a1)
	mustAdd(t, w, b)
	a2 := Attempt("e/h/a#1", "fpa2")
	mustAdd(t, w, a2)
	cur := currents(t, w)
	if len(cur) != 2 {
		t.Fatalf("ForEachCurrent gave %d addresses, want 2: %v", len(cur), cur)
	}
	want := state.Current{AttemptID: a2.ID, AgentFingerprint: "fpa2", VerifyFingerprint: "verify-fpa2", JudgeFingerprint: "judge-fpa2", Status: state.StatusPending}
	if cur["e/h/a#1"] != want {
		t.Errorf("current of e/h/a#1 = %+v, want %+v", cur["e/h/a#1"], want)
	}
	if cur["e/h/b#1"].AttemptID != b.ID {
		t.Errorf("current of e/h/b#1 moved to %s", cur["e/h/b#1"].AttemptID)
	}
	got, err := w.CurrentAttempt("e/h/a#1")
	if err != nil || got.ID != a2.ID {
		t.Errorf("CurrentAttempt = %v, %v; want %s", got, err, a2.ID)
	}
	// Ending the older attempt does not move the pointer back.
	if err := w.Finish(a1.ID, state.StatusErrored, &state.Outcome{Error: "late"}); err != nil {
		t.Fatal(err)
	}
	if c := currents(t, w)["e/h/a#1"]; c.AttemptID != a2.ID || c.Status != state.StatusPending {
		t.Errorf("finishing a replaced attempt changed the current one: %+v", c)
	}
}

func (s suite) transitionsInOrder(t *testing.T) {
	w := s.writer(t, t.TempDir())
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	for _, st := range []state.Status{state.StatusAgent, state.StatusVerify, state.StatusJudge} {
		if err := w.Transition(a.ID, state.Transition{Status: st, Note: "to " + string(st)}); err != nil {
			t.Fatalf("Transition %s: %v", st, err)
		}
	}
	reward := 1.0
	out := &state.Outcome{Class: state.ClassPassed, Reward: &reward, Rewards: map[string]float64{"reward": 1}, EventCount: 3}
	if err := w.Finish(a.ID, state.StatusFinished, out); err != nil {
		t.Fatal(err)
	}
	got, err := s.reader(t, w.Dir()).Attempt(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seq []state.Status
	for i, tr := range got.Transitions {
		seq = append(seq, tr.Status)
		if tr.At.IsZero() {
			t.Errorf("transition %d (%s) has no time", i, tr.Status)
		}
		if i > 0 && tr.At.Before(got.Transitions[i-1].At) {
			t.Errorf("transition %d (%s) at %v is before the one before it (%v)", i, tr.Status, tr.At, got.Transitions[i-1].At)
		}
	}
	if fmt.Sprint(seq) != "[agent verify judge finished]" {
		t.Errorf("transitions = %v, want [agent verify judge finished]", seq)
	}
	if got.Transitions[0].Note != "to agent" {
		t.Errorf("transition note lost: %q", got.Transitions[0].Note)
	}
	if got.Outcome == nil || got.Outcome.Class != state.ClassPassed || got.Outcome.Reward == nil || *got.Outcome.Reward != 1 || got.Outcome.EventCount != 3 {
		t.Errorf("outcome = %+v, want the one given to Finish", got.Outcome)
	}
	if got.Outcome.StartedAt.IsZero() || got.Outcome.FinishedAt.IsZero() {
		t.Errorf("outcome times not filled in: %+v", got.Outcome)
	}
	c := currents(t, w)["e/h/t#1"]
	if c.Status != state.StatusFinished || c.Class != state.ClassPassed {
		t.Errorf("current = %+v, want finished/passed", c)
	}
}

func (s suite) endedAttemptTakesNoTransition(t *testing.T) {
	w := s.writer(t, t.TempDir())
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	if err := w.Finish(a.ID, state.StatusFinished, &state.Outcome{Class: state.ClassTaskFailure}); err != nil {
		t.Fatal(err)
	}
	before := mustMeta(t, w)
	if err := w.Transition(a.ID, state.Transition{Status: state.StatusAgent}); err == nil {
		t.Errorf("Transition of a finished attempt succeeded")
	}
	if err := w.Finish(a.ID, state.StatusErrored, nil); err == nil {
		t.Errorf("Finish of a finished attempt succeeded")
	}
	if err := w.Transition("no-such-attempt", state.Transition{Status: state.StatusAgent}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Transition of an unknown attempt: %v, want ErrNotFound", err)
	}
	if err := w.Finish(a.ID, state.StatusAgent, nil); err == nil {
		t.Errorf("Finish with a status that is not final succeeded")
	}
	if after := mustMeta(t, w); after.Serial != before.Serial {
		t.Errorf("refused writes changed the serial from %d to %d", before.Serial, after.Serial)
	}
	got, _ := w.Attempt(a.ID)
	if got.Status() != state.StatusFinished || len(got.Transitions) != 1 {
		t.Errorf("refused writes changed the attempt: %+v", got.Transitions)
	}
}

func (s suite) snapshotKept(t *testing.T) {
	w := s.writer(t, t.TempDir())
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	if err := w.Finish(a.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed, Snapshot: "sha256:snap"}); err != nil {
		t.Fatal(err)
	}
	if c := currents(t, w)["e/h/t#1"]; !c.SnapshotKept {
		t.Errorf("an attempt finished with a snapshot is not marked as keeping it: %+v", c)
	}
	if err := w.SetSnapshotKept(a.ID, false); err != nil {
		t.Fatal(err)
	}
	if c := currents(t, w)["e/h/t#1"]; c.SnapshotKept {
		t.Errorf("SetSnapshotKept(false) did not stick: %+v", c)
	}
	if err := w.SetSnapshotKept("no-such-attempt", true); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("SetSnapshotKept of an unknown attempt: %v, want ErrNotFound", err)
	}
}

func (s suite) runs(t *testing.T) {
	w := s.writer(t, t.TempDir())
	r := &state.Run{Planned: 2}
	if err := w.BeginRun(r); err != nil {
		t.Fatal(err)
	}
	if r.ID == "" || r.PID != os.Getpid() || r.Host == "" || r.Status != "running" || r.StartedAt.IsZero() {
		t.Errorf("BeginRun did not fill in the run: %+v", r)
	}
	a, b := Attempt("e/h/a#1", "fp"), Attempt("e/h/b#1", "fp")
	a.RunID, b.RunID = r.ID, r.ID
	mustAdd(t, w, a)
	mustAdd(t, w, b)
	if err := w.FinishRun(r.ID, "finished"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Run(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "finished" || got.FinishedAt.IsZero() || got.Planned != 2 {
		t.Errorf("Run = %+v, want finished with a finish time", got)
	}
	if fmt.Sprint(got.Attempts) != fmt.Sprint([]string{a.ID, b.ID}) {
		t.Errorf("Run.Attempts = %v, want [%s %s]", got.Attempts, a.ID, b.ID)
	}
	r2 := &state.Run{}
	if err := w.BeginRun(r2); err != nil {
		t.Fatal(err)
	}
	runs, err := w.Runs()
	if err != nil || len(runs) != 2 || runs[0].ID != r.ID || runs[1].ID != r2.ID {
		t.Errorf("Runs = %v, %v; want both, oldest first", runs, err)
	}
	if _, err := w.Run("nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Run of an unknown id: %v, want ErrNotFound", err)
	}
	if err := w.FinishRun("nope", "finished"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("FinishRun of an unknown id: %v, want ErrNotFound", err)
	}
}

func (s suite) blobs(t *testing.T) {
	w := s.writer(t, t.TempDir())
	data := []byte("echo hello\n")
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	sha, err := w.PutBlob(data)
	if err != nil {
		t.Fatal(err)
	}
	if sha != want {
		t.Fatalf("PutBlob = %s, want the content's SHA-256 %s", sha, want)
	}
	path := w.BlobPath(sha)
	if !strings.HasPrefix(path, w.Dir()) || filepath.Base(path) != sha {
		t.Errorf("BlobPath = %s, want a file named by its hash in the store", path)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm()&0o222 != 0 {
		t.Errorf("blob mode %v is writable, want read-only", info.Mode().Perm())
	}
	// Storing it again is a no-op.
	again, err := w.PutBlob(data)
	if err != nil || again != sha {
		t.Errorf("PutBlob of stored content = %s, %v; want %s, nil", again, err, sha)
	}
	src := filepath.Join(t.TempDir(), "test.sh")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fsha, size, err := w.PutBlobFile(src)
	if err != nil || fsha != sha || size != int64(len(data)) {
		t.Errorf("PutBlobFile = %s, %d, %v; want %s, %d", fsha, size, err, sha, len(data))
	}
	got, err := s.reader(t, w.Dir()).Blob(sha)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("Blob = %q, %v; want %q", got, err, data)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	bigFile := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(bigFile, big, 0o644); err != nil {
		t.Fatal(err)
	}
	bsha, bsize, err := w.PutBlobFile(bigFile)
	if err != nil || bsize != int64(len(big)) {
		t.Fatalf("PutBlobFile(1 MiB) = %d, %v", bsize, err)
	}
	if b, _ := w.Blob(bsha); !bytes.Equal(b, big) {
		t.Errorf("a 1 MiB blob did not read back whole")
	}
	var missing [32]byte
	if _, err := w.Blob(hex.EncodeToString(missing[:])); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Blob of unknown content: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "../../state.db", strings.Repeat("A", 64), sha[:10]} {
		if p := w.BlobPath(bad); p != "" {
			t.Errorf("BlobPath(%q) = %q, want \"\" for a name that is no SHA-256", bad, p)
		}
		if _, err := w.Blob(bad); err == nil {
			t.Errorf("Blob(%q) succeeded", bad)
		}
	}
	if _, err := s.reader(t, w.Dir()).PutBlob(data); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("PutBlob on a reader: %v, want ErrReadOnly", err)
	}
}

func (s suite) secondWriterRefused(t *testing.T) {
	dir := t.TempDir()
	s.writer(t, dir)
	start := time.Now().Add(-time.Second)
	second, err := s.open(t, dir, state.Options{Writer: true, Command: "hemra apply"})
	if err == nil {
		second.Close()
		t.Fatal("a second writer opened the store while the first holds it")
	}
	var locked *state.ErrLocked
	if !errors.As(err, &locked) {
		t.Fatalf("second writer got %v (%T), want *state.ErrLocked", err, err)
	}
	host, _ := os.Hostname()
	if locked.PID != os.Getpid() || locked.Host != host || locked.Command != "hemra apply" {
		t.Errorf("ErrLocked = %+v, want pid %d on %s (hemra apply)", locked, os.Getpid(), host)
	}
	if locked.Since.Before(start) || locked.Since.After(time.Now().Add(time.Second)) {
		t.Errorf("ErrLocked.Since = %v, want the time the first writer opened", locked.Since)
	}
	msg := err.Error()
	for _, want := range []string{fmt.Sprintf("locked by pid %d", os.Getpid()), host, "(hemra apply)", "since "} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

func (s suite) lockTimeoutWaitsThenSucceeds(t *testing.T) {
	dir := t.TempDir()
	first := s.writer(t, dir)
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, first, a)
	released := make(chan struct{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		first.Close()
		close(released)
	}()
	second, err := s.open(t, dir, state.Options{Writer: true, LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("a writer with a lock timeout did not get the lock once it was free: %v", err)
	}
	defer second.Close()
	select {
	case <-released:
	default:
		t.Fatal("the second writer got the lock while the first still held it")
	}
	if _, err := second.CurrentAttempt("e/h/t#1"); err != nil {
		t.Errorf("the second writer does not see the first one's attempt: %v", err)
	}
}

func (s suite) lockTimeoutGivesUp(t *testing.T) {
	dir := t.TempDir()
	s.writer(t, dir)
	_, err := s.open(t, dir, state.Options{Writer: true, LockTimeout: 150 * time.Millisecond})
	var locked *state.ErrLocked
	if !errors.As(err, &locked) {
		t.Fatalf("got %v, want *state.ErrLocked after the timeout", err)
	}
	if !strings.Contains(err.Error(), "gave up after waiting 150ms") {
		t.Errorf("message %q does not say how long it waited", err)
	}
}

func (s suite) readerWhileWriterHoldsLock(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	if err := w.Transition(a.ID, state.Transition{Status: state.StatusAgent}); err != nil {
		t.Fatal(err)
	}
	r := s.reader(t, dir)
	got, err := r.CurrentAttempt("e/h/t#1")
	if err != nil {
		t.Fatalf("a reader could not read while the writer holds the store: %v", err)
	}
	if got.ID != a.ID || got.Status() != state.StatusAgent {
		t.Errorf("reader sees %s in %s, want %s in agent", got.ID, got.Status(), a.ID)
	}
	if mr, mw := mustMeta(t, r), mustMeta(t, w); mr != mw {
		t.Errorf("reader meta %+v, writer meta %+v", mr, mw)
	}
	// And the writer keeps writing after the reader has read.
	if err := w.Finish(a.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed}); err != nil {
		t.Fatalf("the writer could not write after a reader read: %v", err)
	}
	if got, _ := r.CurrentAttempt("e/h/t#1"); got.Status() != state.StatusFinished {
		t.Errorf("the reader does not see the writer's later write")
	}
}

func (s suite) readersDuringBusyWrites(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	const n = 40
	as := make([]*state.Attempt, n)
	for i := range as {
		as[i] = Attempt(fmt.Sprintf("e/h/t%02d#1", i), "fp")
	}
	if err := w.AddAttempts(as); err != nil {
		t.Fatal(err)
	}
	// Writers hammer the store from many goroutines while a reader reads.
	var wg sync.WaitGroup
	errs := make(chan error, 3*n+10)
	for _, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, st := range []state.Status{state.StatusAgent, state.StatusVerify} {
				if err := w.Transition(a.ID, state.Transition{Status: st}); err != nil {
					errs <- err
				}
			}
			if err := w.Finish(a.ID, state.StatusFinished, &state.Outcome{Class: state.ClassTaskFailure}); err != nil {
				errs <- err
			}
		}()
	}
	r := s.reader(t, dir)
	for range 10 {
		if err := r.ForEachCurrent(func(string, state.Current) error { return nil }); err != nil {
			errs <- fmt.Errorf("reader: %w", err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for addr, c := range currents(t, r) {
		if c.Status != state.StatusFinished {
			t.Errorf("%s ended as %s, want finished", addr, c.Status)
		}
	}
	for _, a := range as {
		got, _ := r.Attempt(a.ID)
		if got == nil || len(got.Transitions) != 3 {
			t.Errorf("attempt %s has transitions %v, want agent, verify, finished", a.ID, got)
		}
	}
}

func (s suite) readerCannotWrite(t *testing.T) {
	dir := t.TempDir()
	mustAdd(t, s.writer(t, dir), Attempt("e/h/t#1", "fp"))
	r := s.reader(t, dir)
	if err := r.AddAttempt(Attempt("e/h/t#2", "fp")); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("AddAttempt on a reader: %v, want ErrReadOnly", err)
	}
	if err := r.BeginRun(&state.Run{}); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("BeginRun on a reader: %v, want ErrReadOnly", err)
	}
	if _, err := r.RecoverInterrupted(); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("RecoverInterrupted on a reader: %v, want ErrReadOnly", err)
	}
}

func (s suite) recoverInterrupted(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	run := &state.Run{}
	if err := w.BeginRun(run); err != nil {
		t.Fatal(err)
	}
	running, pending, done := Attempt("e/h/a#1", "fp"), Attempt("e/h/b#1", "fp"), Attempt("e/h/c#1", "fp")
	for _, a := range []*state.Attempt{running, pending, done} {
		a.RunID = run.ID
		mustAdd(t, w, a)
	}
	if err := w.Transition(running.ID, state.Transition{Status: state.StatusAgent}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(done.ID, state.StatusFinished, &state.Outcome{Class: state.ClassPassed}); err != nil {
		t.Fatal(err)
	}
	// The process "dies": the lock goes, nothing else happens.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w2 := s.writer(t, dir)
	n, err := w2.RecoverInterrupted()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("RecoverInterrupted marked %d attempts, want 2 (one running, one pending)", n)
	}
	for _, a := range []*state.Attempt{running, pending} {
		got, _ := w2.Attempt(a.ID)
		last := got.Transitions[len(got.Transitions)-1]
		if got.Status() != state.StatusInterrupted || !strings.Contains(last.Note, "hemra exited while the attempt was running") {
			t.Errorf("%s: last transition %+v, want interrupted with a note", a.Address, last)
		}
		if got.Outcome == nil || got.Outcome.Class != state.ClassInterrupted || !got.Outcome.Class.Retryable() {
			t.Errorf("%s: outcome %+v, want class interrupted", a.Address, got.Outcome)
		}
	}
	cur := currents(t, w2)
	if c := cur["e/h/a#1"]; c.Status != state.StatusInterrupted || c.Class != state.ClassInterrupted {
		t.Errorf("current of the interrupted attempt = %+v", c)
	}
	if c := cur["e/h/c#1"]; c.Status != state.StatusFinished || c.Class != state.ClassPassed {
		t.Errorf("RecoverInterrupted touched a finished attempt: %+v", c)
	}
	if r, _ := w2.Run(run.ID); r.Status != "interrupted" || r.FinishedAt.IsZero() {
		t.Errorf("the run left running is %+v, want interrupted", r)
	}
	before := mustMeta(t, w2)
	if n, err := w2.RecoverInterrupted(); n != 0 || err != nil {
		t.Errorf("second RecoverInterrupted = %d, %v; want 0, nil", n, err)
	}
	if after := mustMeta(t, w2); after != before {
		t.Errorf("RecoverInterrupted with nothing to do changed the serial: %+v -> %+v", before, after)
	}
}

func (s suite) valuesCopiedOut(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	a := Attempt("e/h/t#1", "fp")
	mustAdd(t, w, a)
	// Changing the caller's value after the write changes nothing stored.
	a.Manifest.AgentFingerprint = "changed-after-add"
	a.Manifest.Inputs[0].Value = "changed"
	r := s.reader(t, dir)
	got, err := r.Attempt(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest.AgentFingerprint != "fp" || got.Manifest.Inputs[0].Value != "m" {
		t.Errorf("stored attempt changed with the caller's value: %+v", got.Manifest)
	}
	// Changing what was read changes nothing stored.
	got.Manifest.Inputs[0].Value = "scribbled"
	got.Transitions = append(got.Transitions, state.Transition{Status: state.StatusErrored})
	again, _ := r.Attempt(a.ID)
	if again.Manifest.Inputs[0].Value != "m" || len(again.Transitions) != 0 {
		t.Errorf("a read value shares memory with the store: %+v", again)
	}
	// Keys and values handed to ForEachCurrent outlive the transaction and
	// later writes.
	var addrs []string
	var seen []state.Current
	if err := r.ForEachCurrent(func(addr string, c state.Current) error {
		addrs = append(addrs, addr)
		seen = append(seen, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		mustAdd(t, w, Attempt(fmt.Sprintf("e/h/zz%02d#1", i), "other"))
	}
	if len(addrs) != 1 || addrs[0] != "e/h/t#1" || seen[0].AttemptID != a.ID || seen[0].AgentFingerprint != "fp" {
		t.Errorf("values from ForEachCurrent changed after the view: %q %+v", addrs, seen)
	}
}

func (s suite) newerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	mustAdd(t, w, Attempt("e/h/t#1", "fp"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := state.SetFormatVersionForTesting(dir, state.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []state.Options{{}, {Writer: true}} {
		st, err := s.open(t, dir, opts)
		if err == nil {
			st.Close()
			t.Errorf("Open(writer=%v) of a newer format succeeded", opts.Writer)
			continue
		}
		want := fmt.Sprintf("format version %d, newer than the %d this hemra reads", state.FormatVersion+1, state.FormatVersion)
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "upgrade hemra") {
			t.Errorf("Open(writer=%v): %q, want it to say %q and what to do", opts.Writer, err, want)
		}
	}
	// A refused writer does not keep the lock.
	if err := state.SetFormatVersionForTesting(dir, state.FormatVersion); err != nil {
		t.Fatal(err)
	}
	s.writer(t, dir)
}

func (s suite) badInputRefused(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	for _, a := range []*state.Attempt{
		Attempt("", "fp"),
		Attempt("e/h/t\x00x#1", "fp"),
		Attempt("e/h/caf\xe9#1", "fp"), // Latin-1: JSON would not keep it
		{ID: "../../etc/passwd", Address: "e/h/t#1"},
	} {
		if err := w.AddAttempt(a); err == nil {
			t.Errorf("AddAttempt(%q, id %q) succeeded", a.Address, a.ID)
		}
	}
	two := []*state.Attempt{Attempt("e/h/a#1", "fp"), Attempt("e/h/b#1", "fp")}
	two[1].ID = "same"
	two[0].ID = "same"
	if err := w.AddAttempts(two); err == nil {
		t.Errorf("AddAttempts with one id twice succeeded")
	}
	if n := len(currents(t, w)); n != 0 {
		t.Errorf("refused attempts were recorded: %d addresses", n)
	}
	for _, p := range []string{w.EventLogPath("../../x"), w.WorkDir("../x")} {
		if rel, err := filepath.Rel(dir, p); err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("a path for a hostile id leaves its folder: %s", p)
		}
	}
	if _, err := s.open(t, filepath.Join(dir, "state.db"), state.Options{}); err == nil {
		t.Errorf("opening a file as a store succeeded")
	}
	if _, err := s.open(t, "", state.Options{}); err == nil {
		t.Errorf("opening an empty path succeeded")
	}
}

func (s suite) checkFindsInconsistencies(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	sha, err := w.PutBlob([]byte("instruction\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := Attempt("e/h/t#1", "fp")
	a.Manifest.Inputs = append(a.Manifest.Inputs, state.Input{Stage: "agent", Path: "task.instruction.md", Value: "sha256:" + sha, Blob: sha})
	mustAdd(t, w, a)
	rep, err := w.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || len(rep.OrphanBlobs) != 0 || rep.Attempts != 1 || rep.Blobs != 1 {
		t.Errorf("Check of a sound store = %+v, want 1 attempt, 1 blob, nothing else", rep)
	}
	orphan, _ := w.PutBlob([]byte("nobody names me"))
	b := Attempt("e/h/u#1", "fp")
	var gone [32]byte
	b.Outcome = &state.Outcome{Artifacts: []state.Artifact{{Path: "out.txt", SHA256: hex.EncodeToString(gone[:])}}}
	mustAdd(t, w, b)
	rep, err = w.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.OrphanBlobs) != 1 || !strings.HasSuffix(rep.OrphanBlobs[0], orphan) {
		t.Errorf("Check orphans = %v, want the blob no record names", rep.OrphanBlobs)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "out.txt") || !strings.Contains(rep.Problems[0], "missing") {
		t.Errorf("Check problems = %q, want one naming the missing artifact blob", rep.Problems)
	}
}

// checkFindsMissingEventLog: an attempt's record names its event log; Check
// reports one deleted by hand, and lists a log no record names.
func (s suite) checkFindsMissingEventLog(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	a := Attempt("e/h/t#1", "fp")
	a.ID = state.NewID()
	a.Transitions = []state.Transition{{Status: state.StatusFinished}}
	log := w.EventLogPath(a.ID)
	if err := os.WriteFile(log, []byte(`{"type":"log"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Outcome = &state.Outcome{EventsLog: "events/" + filepath.Base(log)}
	mustAdd(t, w, a)
	if rep, err := w.Check(); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("Check with the log in place = %+v, %v; want clean", rep, err)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	stray := w.EventLogPath(state.NewID())
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "event log") || !strings.Contains(rep.Problems[0], "missing") || !strings.Contains(rep.Problems[0], a.ID) {
		t.Errorf("Check problems = %q, want one naming %s's missing event log", rep.Problems, a.ID)
	}
	if len(rep.OrphanLogs) != 1 || !strings.HasSuffix(rep.OrphanLogs[0], filepath.Base(stray)) {
		t.Errorf("Check orphan logs = %q, want %s", rep.OrphanLogs, filepath.Base(stray))
	}
}

// checkOfMissingStore: there is nothing to check in a store that does not
// exist, which Check says instead of "no inconsistencies".
func (s suite) checkOfMissingStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	r := s.reader(t, dir)
	if rep, err := r.Check(); !errors.Is(err, state.ErrNoState) {
		t.Errorf("Check of a missing store = %+v, %v; want ErrNoState", rep, err)
	}
}

// damagedFileReported: a state.db with a flipped byte in a page it uses is
// reported as damaged by every read, by a writer's open and by Check, with
// no crash and nothing written.
func (s suite) damagedFileReported(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	for i := range 50 {
		mustAdd(t, w, Attempt(fmt.Sprintf("e/h/t%02d#1", i), "fp"))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "state.db")
	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated", good[:3*4096]},
		{"root page flipped", flipped(good, rootPage(good)*4096+8)},
		{"meta pages flipped", flipped(flipped(good, 20), 4096+20)},
	} {
		if err := os.WriteFile(db, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		// A reader's open reads the format version: it may see the
		// damage already.
		r, err := s.open(t, dir, state.Options{})
		if err == nil {
			_, err = r.Check()
		}
		if !errors.Is(err, state.ErrDamaged) {
			t.Errorf("%s: open and Check = %v, want ErrDamaged", tc.name, err)
		}
		if w, err := s.open(t, dir, state.Options{Writer: true}); !errors.Is(err, state.ErrDamaged) {
			t.Errorf("%s: writer open = %v, want ErrDamaged", tc.name, err)
			if err == nil {
				w.Close()
			}
		}
		after, _ := os.ReadFile(db)
		if !bytes.Equal(after, tc.data) {
			t.Errorf("%s: the damaged file was changed", tc.name)
		}
	}
}

// rootPage is the page of the root bucket in a bbolt file with 4 KiB pages,
// read from the newer of its two meta pages (page header 16 bytes, then
// magic, version, page size, flags, root bucket {pgid, sequence},
// freelist, pgid, txid).
func rootPage(db []byte) int {
	meta := func(page int) (root, txid uint64) {
		m := db[page*4096+16:]
		return binary.LittleEndian.Uint64(m[16:]), binary.LittleEndian.Uint64(m[48:])
	}
	r0, t0 := meta(0)
	r1, t1 := meta(1)
	if t1 > t0 {
		return int(r1)
	}
	return int(r0)
}

func flipped(b []byte, off int) []byte {
	out := bytes.Clone(b)
	out[off] ^= 0xff
	return out
}

// backupOnClose: a writer that recorded something leaves state.db.backup
// equal to the state it closed; one that recorded nothing leaves none.
func (s suite) backupOnClose(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.BackupPath()); err == nil {
		t.Errorf("a writer that recorded nothing left a backup")
	}
	w = s.writer(t, dir)
	mustAdd(t, w, Attempt("e/h/t#1", "fp"))
	want := mustMeta(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "restored")
	data, err := os.ReadFile(w.BackupPath())
	if err != nil {
		t.Fatalf("no backup after a writer recorded an attempt: %v", err)
	}
	if err := os.MkdirAll(backup, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backup, "state.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.reader(t, backup)
	if got := mustMeta(t, r); got != want {
		t.Errorf("backup holds %+v, want the state the writer closed, %+v", got, want)
	}
	if _, err := r.CurrentAttempt("e/h/t#1"); err != nil {
		t.Errorf("backup lacks the attempt: %v", err)
	}
}

func (s suite) bulkAdd(t *testing.T) {
	dir := t.TempDir()
	w := s.writer(t, dir)
	before := mustMeta(t, w)
	var as []*state.Attempt
	for i := range 500 {
		a := Attempt(fmt.Sprintf("e/h/t%03d#1", i), fmt.Sprint("fp", i))
		a.Transitions = []state.Transition{{Status: state.StatusFinished}}
		a.Outcome = &state.Outcome{Class: state.ClassPassed}
		as = append(as, a)
	}
	if err := w.AddAttempts(as); err != nil {
		t.Fatal(err)
	}
	if after := mustMeta(t, w); after.Serial != before.Serial+1 {
		t.Errorf("AddAttempts of 500 moved the serial %d -> %d, want one transaction", before.Serial, after.Serial)
	}
	cur := currents(t, s.reader(t, dir))
	if len(cur) != 500 || cur["e/h/t123#1"].AgentFingerprint != "fp123" || cur["e/h/t123#1"].Status != state.StatusFinished {
		t.Errorf("after AddAttempts: %d addresses, t123 = %+v", len(cur), cur["e/h/t123#1"])
	}
	// A finished bulk attempt is not left for RecoverInterrupted.
	if n, err := w.RecoverInterrupted(); n != 0 || err != nil {
		t.Errorf("RecoverInterrupted after a bulk load of finished attempts = %d, %v", n, err)
	}
}
