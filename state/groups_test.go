package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// planned is an attempt shaped like the planner's: three stages, inputs
// sorted by path within each, task inputs shared by the harnesses and
// harness inputs shared by the tasks.
func planned(harness, task string, rep int) *Attempt {
	fp := func(s string) string { return fmt.Sprintf("%064x", len(s)+rep) + "" }
	agentFP, verifyFP := fp("a"+harness+task), fp("v"+harness+task)
	inputs := []Input{
		{Stage: "agent", Path: "attempt.repetition", Value: fmt.Sprint(rep)},
		{Stage: "agent", Path: "harness.args.model", Value: `"` + harness + `"`},
		{Stage: "agent", Path: "hemra.execution_semantics", Value: `"1"`},
		{Stage: "agent", Path: "image alpine:3.20", Value: "sha256:" + fmt.Sprintf("%064d", 4)},
		{Stage: "agent", Path: "mount /harness/agent.py", Value: "sha256:aa", Blob: "aa"},
		{Stage: "agent", Path: "sandbox.kind", Value: `"docker"`},
		{Stage: "agent", Path: "task.instruction.md", Value: "sha256:" + task, Blob: task},
		{Stage: "agent", Path: "task.toml.agent.timeout_sec", Value: "360"},
		{Stage: "verify", Path: "agent.fingerprint", Value: agentFP},
		{Stage: "verify", Path: "task.tests/test.sh", Value: "sha256:t" + task, Blob: "t" + task},
		{Stage: "verify", Path: "verifier.network", Value: `"none"`},
		{Stage: "judge", Path: "verify.fingerprint", Value: verifyFP},
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reward := 0.5
	return &Attempt{
		ID: NewID(), Address: "e/" + harness + "/" + task + "#" + fmt.Sprint(rep), RunID: "r1",
		Manifest: Manifest{FormatVersion: 1, Eval: "e", Harness: harness, Task: task, Repetition: rep,
			AgentFingerprint: agentFP, VerifyFingerprint: verifyFP, JudgeFingerprint: fp("j" + harness + task),
			Inputs:   inputs,
			Images:   map[string]string{"alpine:3.20": "sha256:" + fmt.Sprintf("%064d", 4)},
			Sandbox:  SandboxRecord{Kind: "docker", Settings: json.RawMessage(`{"kind":"docker","network":"none"}`), Offered: []string{"network_block"}},
			EnvNames: []string{"OPENAI_API_KEY"},
		},
		Transitions: []Transition{{Status: StatusPending, At: at}, {Status: StatusFinished, At: at}},
		Outcome:     &Outcome{Class: ClassTaskFailure, Reward: &reward, StartedAt: at, FinishedAt: at},
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A record decodes to exactly the attempt encoded, grouped or not.
func TestRecordRoundTrip(t *testing.T) {
	shuffled := planned("h", "t1", 1)
	in := shuffled.Manifest.Inputs
	in[0], in[len(in)-2] = in[len(in)-2], in[0] // an order the store cannot restore
	dup := planned("h", "t1", 2)
	dup.Manifest.Inputs = append(dup.Manifest.Inputs, dup.Manifest.Inputs[1]) // a path twice
	for name, a := range map[string]*Attempt{
		"planned":      planned("h", "t1", 1),
		"empty":        {ID: NewID(), Address: "e/h/t#1"},
		"no inputs":    {ID: NewID(), Address: "e/h/t#1", Manifest: Manifest{Eval: "e", Sandbox: SandboxRecord{Kind: "local"}}},
		"out of order": shuffled,
		"path twice":   dup,
	} {
		rec, groups, err := encodeRecord(a)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		db, err := bolt.Open(filepath.Join(dir, "db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucket(bucketGroups); err != nil {
				return err
			}
			if err := putGroups(tx, groups); err != nil {
				return err
			}
			got, err := decodeRecord(a.ID, rec, newGroupReader(tx))
			if err != nil {
				return err
			}
			if jsonOf(t, got) != jsonOf(t, a) {
				t.Errorf("%s: decoded\n%s\nwant\n%s", name, jsonOf(t, got), jsonOf(t, a))
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "out of order" || name == "path twice" {
			if len(groups) != 0 {
				t.Errorf("%s: %d groups, want the record kept whole", name, len(groups))
			}
		} else if name == "planned" && len(rec) >= len(jsonOf(t, a)) {
			t.Errorf("%s: the record is %d bytes, not less than the attempt's %d", name, len(rec), len(jsonOf(t, a)))
		}
	}
}

// Attempts sharing a task or a harness share its groups, and the groups of
// two manifests differ only where an input does.
func TestGroupsAreShared(t *testing.T) {
	a, b, c := planned("h1", "t1", 1), planned("h2", "t1", 1), planned("h1", "t2", 1)
	ids := func(x *Attempt) map[string]string {
		gs, _ := SplitInputs(x.Manifest.Inputs)
		out := map[string]string{}
		for _, g := range gs {
			out[g.Stage+"/"+g.Kind] = g.ID
		}
		return out
	}
	ga, gb, gc := ids(a), ids(b), ids(c)
	for _, k := range []string{"agent/task", "verify/task", "agent/attempt", "verify/run"} {
		if ga[k] != gb[k] {
			t.Errorf("%s: another harness on the same task has another group", k)
		}
	}
	if ga["agent/run"] == gb["agent/run"] {
		t.Errorf("agent/run: two harnesses share a group")
	}
	if ga["agent/run"] != gc["agent/run"] || ga["agent/task"] == gc["agent/task"] {
		t.Errorf("the same harness on another task: groups %v vs %v", ga, gc)
	}
}

// writeV2 turns the store at dir (format 6) into what format 2 wrote:
// every attempt record whole, no groups bucket, and writeV4's JSON
// current values.
func writeV2(t *testing.T, dir string) {
	t.Helper()
	writeV4(t, dir)
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		v := &View{tx: tx}
		att := tx.Bucket(bucketAttempts)
		var ks, vs [][]byte
		if err := att.ForEach(func(k, val []byte) error {
			a, err := v.decodeAttempt(string(k), val)
			if err != nil {
				return err
			}
			whole, err := json.Marshal(a)
			ks, vs = append(ks, append([]byte(nil), k...)), append(vs, whole)
			return err
		}); err != nil {
			return err
		}
		for i := range ks {
			if err := att.Put(ks[i], vs[i]); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketGroups); err != nil {
			return err
		}
		return putUint64(tx.Bucket(bucketMeta), keyFormatVersion, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dump is every key and value of every bucket but meta.
func dump(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if bytes.Equal(name, bucketMeta) {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"/"+string(k)] = string(v)
				return nil
			})
		})
	})
	return out
}

// writeAttempts records the same attempts in each store, one of them left
// open after a transition, and returns them (the open one last).
func writeAttempts(t *testing.T, dirs ...string) []*Attempt {
	t.Helper()
	var attempts []*Attempt
	for _, task := range []string{"t1", "t2", "t3"} {
		for _, h := range []string{"h1", "h2"} {
			for rep := 1; rep <= 2; rep++ {
				attempts = append(attempts, planned(h, task, rep))
			}
		}
	}
	open := planned("h1", "t9", 1)
	open.Transitions, open.Outcome = open.Transitions[:1], nil
	attempts = append(attempts, open)
	for _, dir := range dirs {
		s, err := Open(dir, Options{Writer: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.BeginRun(&Run{ID: "r1", StartedAt: time.Unix(0, 0).UTC(), Host: "h", PID: 1}); err != nil {
			t.Fatal(err)
		}
		// Copies: AddAttempts fills in fields of what it is given.
		var cp []*Attempt
		for _, a := range attempts {
			var c Attempt
			if err := json.Unmarshal([]byte(jsonOf(t, a)), &c); err != nil {
				t.Fatal(err)
			}
			cp = append(cp, &c)
		}
		if err := s.AddAttempts(cp); err != nil {
			t.Fatal(err)
		}
		if err := s.Transition(open.ID, Transition{Status: StatusAgent, At: time.Unix(5, 0).UTC()}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return attempts
}

// checkMigrated upgrades the store at old and checks that it then holds
// exactly what the store at fresh holds, and reads back the attempts.
func checkMigrated(t *testing.T, old, fresh string, attempts []*Attempt) {
	t.Helper()
	want := dump(t, fresh)
	s, err := Open(old, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.Meta(); err != nil || m.FormatVersion != FormatVersion {
		t.Fatalf("after the upgrade: %+v, %v", m, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := dump(t, old)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: migrated\n%q\nwritten new\n%q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: only in the migrated store", k)
		}
	}
	r, err := Open(old, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts[:len(attempts)-1] {
		got, err := r.Attempt(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if jsonOf(t, got) != jsonOf(t, a) {
			t.Errorf("%s read back\n%s\nwant\n%s", a.ID, jsonOf(t, got), jsonOf(t, a))
		}
	}
	if rep, err := r.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check of the migrated store: %+v, %v", rep, err)
	}
}

// A store migrated from format 2 holds exactly what the same writes give
// in the current format, and reads the same.
func TestMigrateV2EqualsWrittenNew(t *testing.T) {
	fresh, old := t.TempDir(), t.TempDir()
	attempts := writeAttempts(t, fresh, old)
	writeV2(t, old)
	before := dump(t, old)
	if _, ok := before["groups/"]; ok || len(before) >= len(dump(t, fresh)) {
		t.Fatalf("the format-2 store has %d keys, the new one more: not downgraded", len(before))
	}
	checkMigrated(t, old, fresh, attempts)
}

// writeV3 turns the store at dir (format 6) into what format 3 wrote:
// every attempt record and group as plain JSON, and writeV4's JSON
// current values.
func writeV3(t *testing.T, dir string) {
	t.Helper()
	writeV4(t, dir)
	rewriteStore(t, dir, 3, [][]byte{bucketAttempts, bucketGroups}, func(name, k, val []byte) ([]byte, error) {
		if !packed(val) {
			return nil, fmt.Errorf("%s/%s: not compressed", name, k)
		}
		return unpackValue(val)
	})
}

// rewriteStore rewrites every value of the buckets named in the store at
// dir with what rewrite makes of it, and sets its format: how the tests
// turn a store written new into one an older format wrote.
func rewriteStore(t *testing.T, dir string, format uint64, buckets [][]byte, rewrite func(name, k, val []byte) ([]byte, error)) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
			b := tx.Bucket(name)
			var ks, vs [][]byte
			if err := b.ForEach(func(k, val []byte) error {
				v, err := rewrite(name, k, val)
				ks, vs = append(ks, append([]byte(nil), k...)), append(vs, v)
				return err
			}); err != nil {
				return err
			}
			for i := range ks {
				if err := b.Put(ks[i], vs[i]); err != nil {
					return err
				}
			}
		}
		return putUint64(tx.Bucket(bucketMeta), keyFormatVersion, format)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A store migrated from format 3 holds exactly what the same writes give
// in the current format (the same JSON, compressed; the current values
// binary), and reads the same.
func TestMigrateV3EqualsWrittenNew(t *testing.T) {
	fresh, old := t.TempDir(), t.TempDir()
	attempts := writeAttempts(t, fresh, old)
	writeV3(t, old)
	// A reader reads format 3 as it is, without the upgrade.
	r, err := Open(old, Options{})
	if err != nil {
		t.Fatalf("reader Open of format 3: %v", err)
	}
	for _, a := range attempts[:len(attempts)-1] {
		got, err := r.Attempt(a.ID)
		if err != nil || jsonOf(t, got) != jsonOf(t, a) {
			t.Fatalf("%s read from format 3: %v\n%s\nwant\n%s", a.ID, err, jsonOf(t, got), jsonOf(t, a))
		}
	}
	if rep, err := r.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check of the format-3 store: %+v, %v", rep, err)
	}
	for k, v := range dump(t, old) {
		if (strings.HasPrefix(k, "attempts/") || strings.HasPrefix(k, "groups/")) && !json.Valid([]byte(v)) {
			t.Fatalf("%s in the format-3 store is not JSON: %q", k, v)
		}
	}
	checkMigrated(t, old, fresh, attempts)
}

// writeV5 turns the store at dir (format 6) into what format 5 wrote:
// every summary as its whole JSON, with its id and address.
func writeV5(t *testing.T, dir string) {
	t.Helper()
	rewriteStore(t, dir, 5, [][]byte{bucketSummaries}, func(_, k, val []byte) ([]byte, error) {
		if bytes.Contains(val, []byte(`"id":`)) {
			return nil, fmt.Errorf("summaries/%s has its id: %s", k, val)
		}
		s, err := decodeStoredSummary(k, val)
		if err != nil {
			return nil, err
		}
		return json.Marshal(s)
	})
}

// A store migrated from format 5 holds exactly what the same writes give
// in format 6 (summaries without their id and derived address), and reads
// the same; a reader reads the format-5 store as it is.
func TestMigrateV5EqualsWrittenNew(t *testing.T) {
	fresh, old := t.TempDir(), t.TempDir()
	attempts := writeAttempts(t, fresh, old)
	importAttempt(t, fresh, old)
	writeV5(t, old)
	n := 0
	for k, v := range dump(t, old) {
		if strings.HasPrefix(k, "summaries/") {
			if !strings.HasPrefix(v, `{"id":"`+strings.TrimPrefix(k, "summaries/")+`","a":"`) {
				t.Fatalf("%s in the format-5 store: %s", k, v)
			}
			n++
		}
	}
	if n != len(attempts)+1 {
		t.Fatalf("the format-5 store has %d summaries, want %d", n, len(attempts)+1)
	}
	checkReadThenUpgraded(t, old, fresh, attempts, 5)
}

// writeV4 turns the store at dir (format 6) into what format 4 wrote:
// writeV5's summaries, and every value of the current and imported
// indexes as its JSON.
func writeV4(t *testing.T, dir string) {
	t.Helper()
	writeV5(t, dir)
	rewriteStore(t, dir, 4, [][]byte{bucketCurrent, bucketImported}, func(name, k, val []byte) ([]byte, error) {
		if val[0] != currentTag {
			return nil, fmt.Errorf("%s/%s: not binary", name, k)
		}
		c, err := decodeCurrentBinary(val)
		if err != nil {
			return nil, err
		}
		return json.Marshal(c)
	})
}

// importAttempt records the same imported attempt in each store.
func importAttempt(t *testing.T, dirs ...string) {
	t.Helper()
	at := time.Date(2026, 2, 1, 18, 3, 4, 0, time.UTC)
	reward := 1.0
	run := &Run{ID: "ri", StartedAt: at, FinishedAt: at, Status: "imported", Kind: "import", Source: "jobs/j"}
	imp := &Attempt{ID: NewID(), Address: "import/j/oracle/hello#1", RunID: run.ID,
		Manifest:    Manifest{Eval: "import/j", Harness: "oracle", Task: "hello", Repetition: 1, AgentFingerprint: "sha256:x"},
		Transitions: []Transition{{Status: StatusPending, At: at}, {Status: StatusFinished, At: at}},
		Outcome:     &Outcome{Class: ClassPassed, Reward: &reward, StartedAt: at, FinishedAt: at},
		Origin:      &Origin{Format: "harbor", Job: "j", Trial: "hello__abc", ImportedAt: at}}
	for _, dir := range dirs {
		s, err := Open(dir, Options{Writer: true})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Import([]*Run{run}, []*Attempt{imp}); n != 1 || err != nil {
			t.Fatalf("Import = %d, %v", n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// currents is every address of both indexes with its Current and the
// summary of its attempt, as a reader reads them.
func currents(t *testing.T, dir string) map[string]string {
	t.Helper()
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reader Open: %v", err)
	}
	out := map[string]string{}
	err = r.ForEachCurrent(func(addr string, c Current) error {
		out["current/"+addr] = jsonOf(t, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = r.View(func(v *View) error {
		if err := v.ForEachLatestSummary("", func(s Summary) error {
			out["summary/"+s.Address] = jsonOf(t, s)
			return nil
		}); err != nil {
			return err
		}
		a, err := v.ImportedAttempt("import/j/oracle/hello#1")
		if err == nil {
			out["imported"] = a.ID
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store migrated from format 4 holds exactly what the same writes give
// in the current format (binary current values), and reads the same; a
// reader reads the format-4 store as it is.
func TestMigrateV4EqualsWrittenNew(t *testing.T) {
	fresh, old := t.TempDir(), t.TempDir()
	attempts := writeAttempts(t, fresh, old)
	importAttempt(t, fresh, old)
	writeV4(t, old)
	n := 0
	for k, v := range dump(t, old) {
		if strings.HasPrefix(k, "current/") || strings.HasPrefix(k, "imported/") {
			if !json.Valid([]byte(v)) {
				t.Fatalf("%s in the format-4 store is not JSON: %q", k, v)
			}
			n++
		}
	}
	if n != len(attempts)+1 {
		t.Fatalf("the format-4 store has %d index entries, want %d", n, len(attempts)+1)
	}
	checkReadThenUpgraded(t, old, fresh, attempts, 4)
}

// checkReadThenUpgraded checks that the store at old, in an older format,
// reads (every index entry and its summary) as the one at fresh and
// checks clean as it is, then upgrades to what fresh holds and still
// reads the same.
func checkReadThenUpgraded(t *testing.T, old, fresh string, attempts []*Attempt, format int) {
	t.Helper()
	want := currents(t, fresh)
	if got := currents(t, old); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read from format %d:\n%v\nwant\n%v", format, got, want)
	}
	r, err := Open(old, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check of the format-%d store: %+v, %v", format, rep, err)
	}
	checkMigrated(t, old, fresh, attempts)
	if got := currents(t, old); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read after the upgrade:\n%v\nwant\n%v", got, want)
	}
}

func TestInputsJSONAsEncodingJSON(t *testing.T) {
	cases := [][]Input{
		nil,
		{},
		planned("h", "t", 1).Manifest.Inputs,
		{{Stage: "agent", Path: "harness.args.x", Value: `"<b>&amp;</b> \"q\" \\ é \u2028 ` + "\x01\xff", Blob: "b"}},
	}
	for _, in := range cases {
		want, _ := json.Marshal(in)
		if got := appendInputsJSON(nil, in); string(got) != string(want) {
			t.Errorf("appendInputsJSON = %s, want %s", got, want)
		}
	}
}

func TestInputGroupIDsAsSplitInputs(t *testing.T) {
	in := planned("h", "t", 1).Manifest.Inputs
	groups, _ := SplitInputs(in)
	refs := InputGroupIDs(in)
	if len(refs) != len(groups) {
		t.Fatalf("%d refs, %d groups", len(refs), len(groups))
	}
	for i, g := range groups {
		if refs[i] != (GroupRef{g.ID, g.Stage, g.Kind}) {
			t.Errorf("ref %d = %+v, group %+v", i, refs[i], g)
		}
	}
}

// A store big enough is checked in one id range per CPU: every attempt
// once, problems found in either range.
func TestCheckInRanges(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var as []*Attempt
	for i := range 6000 {
		a := planned("h", fmt.Sprintf("t%04d", i), 1)
		a.ID = IDAt(t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i))
		a.RunID = ""
		as = append(as, a)
	}
	if err := s.AddAttempts(as); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := Open(dir, Options{})
	rep, err := r.Check()
	if err != nil || rep.Attempts != 6000 || rep.Addresses != 6000 || len(rep.Problems) != 0 {
		t.Fatalf("Check = %d attempts, %d addresses, %d problems, %v", rep.Attempts, rep.Addresses, len(rep.Problems), err)
	}
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error {
		_ = tx.Bucket(bucketSummaries).Delete([]byte(as[10].ID))
		_ = tx.Bucket(bucketHistory).Delete(historyKey(as[5990].Address, as[5990].ID))
		return tx.Bucket(bucketCurrent).Put([]byte("e/h/zzz#1"), []byte(`{"a":"nope"}`))
	})
	db.Close()
	rep, err = r.Check()
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Problems
	want := []string{
		"attempts/" + as[5990].ID + ": missing from the history of " + as[5990].Address,
		"current/" + as[5990].Address + ": points at " + as[5990].ID + ", but the newest attempt there is ",
		"current/e/h/zzz#1: attempt nope is missing",
		"current/e/h/zzz#1: points at nope, but the newest attempt there is ",
		"summaries/" + as[10].ID + ": missing or out of step with the attempt record",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
