package state

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seedRecords are an attempt, its current summary, an attempt summary and
// a run as the store writes them.
func seedRecords(f *testing.F) {
	r := 0.5
	a := &Attempt{ID: "06h2sbqjh00015yqrtgg", Address: "e/h/t#1", RunID: "r1",
		Manifest:    Manifest{AgentFingerprint: "aa", VerifyFingerprint: "bb", Inputs: []Input{{Stage: "agent", Path: "task.instruction.md", Value: "sha256:00"}}},
		Transitions: []Transition{{Status: StatusAgent, At: time.Unix(1, 0).UTC()}, {Status: StatusFinished, At: time.Unix(2, 0).UTC()}},
		Outcome:     &Outcome{Class: ClassPassed, Reward: &r, Snapshot: "sha256:ff", Artifacts: []Artifact{{Path: "out.txt", Size: 3, SHA256: "00"}}},
	}
	rec, _ := json.Marshal(a)
	packed, _, _ := encodeRecord(a)          // format 4: compressed
	grouped, _ := unpackValue(packed)        // format 3: the shared parts as group references
	cur, _ := encodeCurrent(currentOf(a))    // format 5: binary, the fingerprints as text
	curJSON, _ := json.Marshal(currentOf(a)) // format 4
	hashes := Current{AttemptID: a.ID, AgentFingerprint: strings.Repeat("0a", 32), VerifyFingerprint: strings.Repeat("f9", 32),
		JudgeFingerprint: strings.Repeat("5e", 32), Status: StatusErrored, Class: ClassInfraError, JudgeRetry: true}
	curRaw, _ := encodeCurrent(hashes) // the fingerprints and the id raw
	run, _ := json.Marshal(&Run{ID: "r1", Status: "finished", Planned: 1, PlanSHA256: "ab"})
	sum := summaryOf(a)
	sum.Rewards, sum.Usage, sum.Started = map[string]float64{"reward": 0.5, "style": 1}, &TokenUsage{InputTokens: 3, CostUSD: 0.25}, -1
	summary, _ := json.Marshal(sum) // format 5 and before
	stored, _ := encodeSummary(sum) // format 6: no id, no address
	f.Add(rec)
	f.Add(grouped)
	f.Add(summary)
	f.Add(stored)
	f.Add(packed)
	f.Add(cur)
	f.Add(curJSON)
	f.Add(curRaw)
	f.Add(run)
	f.Add([]byte(`{"attempt_id":"x","status":"fin\u0069shed"}`))
	f.Add([]byte(`{"attempt_id":"x","status":`))
	f.Add([]byte(`{"pid":42,"host":"h","command":"hemra apply","since":"2026-11-30T13:40:02Z"}`))
}

// FuzzRecordDecoders: any bytes read from state.db as a record (a
// damaged page, a record written by another version) give a record or an
// error, never a panic; a binary current value reads as the one Current
// that encodes to it, and any Current read encodes to a binary value that
// reads back the same; the hand-written fast decoder of JSON current
// summaries and of attempt summaries, and state check's of attempt
// records (scanRecord), agree with encoding/json whenever they take a
// value.
func FuzzRecordDecoders(f *testing.F) {
	seedRecords(f)
	f.Fuzz(func(t *testing.T, val []byte) {
		// Without the groups a record names (a reader that has none).
		if a, err := decodeRecord("id", val, nil); err == nil {
			_ = a.Status()
			_ = currentOf(a)
		}
		// As a transition reads it: the record alone.
		if a, sm, err := decodeStored("id", val); err == nil {
			_ = summaryOf(a)
			_, _ = encodeStored(a, sm)
		}
		if fast, ok := decodeCurrentFast(val); ok {
			var slow Current
			if err := json.Unmarshal(val, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast decoder took %q as %+v; encoding/json: %+v, %v", val, fast, slow, err)
			}
		}
		// As state check reads it.
		scanAgrees(t, val)
		if c, err := decodeCurrent(val); err == nil {
			// Whatever form it was read from, its binary form reads back
			// the same.
			enc, _ := encodeCurrent(c)
			if back, err := decodeCurrentBinary(enc); err != nil || back != c {
				t.Fatalf("%+v (read from %q) encodes as %q, which reads as %+v, %v", c, val, enc, back, err)
			}
		}
		if c, err := decodeCurrentBinary(val); err == nil {
			// A binary value has one form: it is what c encodes as.
			if enc, _ := encodeCurrent(c); !bytes.Equal(enc, val) {
				t.Fatalf("binary decoder took %q as %+v, which encodes as %q", val, c, enc)
			}
			if id, err := currentAttemptID(val, new([idText]byte)); err != nil || string(id) != c.AttemptID {
				t.Fatalf("currentAttemptID(%q) = %q, %v; the decoder reads %q", val, id, err, c.AttemptID)
			}
		}
		if fast, ok := decodeSummaryFast(val); ok {
			var slow Summary
			if err := json.Unmarshal(val, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast decoder took %q as %+v; encoding/json: %+v, %v", val, fast, slow, err)
			}
		}
		// As a summary stored under this key: its stored form encodes
		// back to itself.
		key := []byte("06h2sbqjh00015yqrtgg")
		if s, err := decodeStoredSummary(key, val); err == nil {
			enc, err := encodeSummary(s)
			if err != nil {
				t.Fatalf("summary %+v read from %q does not encode: %v", s, val, err)
			}
			back, err := decodeStoredSummary(key, enc)
			if again, _ := encodeSummary(back); err != nil || !bytes.Equal(again, enc) ||
				back.Address != s.Address || back.ID != string(key) {
				t.Fatalf("summary %+v read from %q is stored as %q, which reads as %+v (%v) and is stored as %q", s, val, enc, back, err, again)
			}
		}
		var r Run
		_ = json.Unmarshal(val, &r)
	})
}

// FuzzLockHolder: whatever writer.lock holds (another hemra's details, a
// half-written file, garbage), the message a second writer gets is made
// without a panic.
func FuzzLockHolder(f *testing.F) {
	seedRecords(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), lockFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = readLockHolder(path).Error()
	})
}
