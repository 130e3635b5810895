package state

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// refsByJSON is what RecordGroups reads of a record, through encoding/json.
func refsByJSON(val []byte) (ids []string, context string, err error) {
	var sa struct {
		Manifest storedManifest `json:"manifest"`
	}
	err = json.Unmarshal(val, &sa)
	return sa.Manifest.InputGroups, sa.Manifest.Context, err
}

func recordRefsSeeds(t testing.TB) [][]byte {
	rec, _, err := encodeRecord(planned("alpha", "task-1", 1))
	if err == nil {
		rec, err = unpackValue(rec) // RecordRefs scans the JSON once decompressed
	}
	if err != nil {
		t.Fatal(err)
	}
	inline, err := json.Marshal(planned("beta", "task-2", 2))
	if err != nil {
		t.Fatal(err)
	}
	r := string(rec)
	return [][]byte{
		rec, inline,
		[]byte(" \n" + strings.ReplaceAll(r, `":`, `" : `) + "\t"),
		[]byte(strings.Replace(r, `"manifest":`, `"manifest":{"context":"first"},"manifest":`, 1)),
		[]byte(strings.Replace(r, `"context":`, `"context":null,"context":`, 1)),
		[]byte(strings.Replace(r, `"input_groups":[`, `"input_groups":null,"input_groups":[`, 1)),
		[]byte(strings.Replace(r, `"context":`, `"Context":`, 1)),
		[]byte(strings.Replace(r, `"manifest":`, `"Manifest":`, 1)),
		[]byte(strings.Replace(r, `"manifest":`, `"man\u0069fest":`, 1)),
		[]byte(strings.Replace(r, `"input_groups":[`, `"input_groups":[null,`, 1)),
		[]byte(strings.Replace(r, `"input_groups":[`, `"input_groups":"x","y":[`, 1)),
		[]byte(strings.Replace(r, `"address":"`, `"address":"\u00e9\"\\`, 1)),
		[]byte(strings.Replace(r, `"repetition":1`, `"repetition":-1.5e+3`, 1)),
		[]byte(strings.Replace(r, `"repetition":1`, `"repetition":01`, 1)),
		[]byte(r + "x"),
		[]byte(r[:len(r)-1]),
		// encoding/json merges a repeated manifest into the first (found by FuzzRecordRefs in CI).
		[]byte(`{"manifest":{"ConteXt":"0"},"manifest":{}}`),
		[]byte(`{"manifest":{"context":"0"},"manifest":{"input_groups":[]}}`),
		[]byte(`{"manifest":null}`),
		[]byte(`{"manifest":{}}`),
		[]byte(`{}`),
		[]byte(`[]`),
		[]byte(``),
	}
}

// RecordRefs reads what RecordGroups reads: the same ids, or no answer
// (and RecordGroups then reads it).
func TestRecordRefsAsRecordGroups(t *testing.T) {
	for i, val := range recordRefsSeeds(t) {
		checkRecordRefs(t, i, val)
	}
	// The scan answers for what encodeRecord writes, not only falls back.
	rec, _, _ := encodeRecord(planned("alpha", "task-1", 1))
	rec, _ = unpackValue(rec)
	if _, ctx, ok := scanRecordRefs(rec); !ok || ctx == "" {
		t.Errorf("a record as encodeRecord writes it is not scanned: ok %v, context %q", ok, ctx)
	}
}

func checkRecordRefs(t *testing.T, i int, val []byte) {
	ids, ctx, ok := scanRecordRefs(val)
	if !ok {
		return
	}
	wantIDs, wantCtx, err := refsByJSON(val)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &typeErr) {
		t.Errorf("%d: %q scanned (%q, %q) but encoding/json refuses it: %v", i, val, ids, ctx, err)
		return
	}
	if err == nil && (!slices.Equal(ids, wantIDs) || ctx != wantCtx) {
		t.Errorf("%d: %q: scanned %q %q, encoding/json reads %q %q", i, val, ids, ctx, wantIDs, wantCtx)
	}
}

func FuzzRecordRefs(f *testing.F) {
	for _, s := range recordRefsSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, val []byte) { checkRecordRefs(t, 0, val) })
}

// A stored record (compressed from format 4) is scanned, not left to
// RecordGroups, and reads as RecordGroups reads it.
func TestRecordRefsOfAStore(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Writer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := planned("alpha", "task-1", 1)
	if err := s.AddAttempt(a); err != nil {
		t.Fatal(err)
	}
	err = s.View(func(v *View) error {
		ids, ctx, whole, err := v.RecordRefs(a.ID)
		if err != nil {
			return err
		}
		rg, wantWhole, err := v.RecordGroups(a.ID)
		if err != nil {
			return err
		}
		if whole != wantWhole || ctx != rg.Context || !slices.Equal(ids, rg.InputGroups) || ctx == "" {
			t.Errorf("RecordRefs: %q %q %v; RecordGroups: %q %q %v", ids, ctx, whole, rg.InputGroups, rg.Context, wantWhole)
		}
		val, err := unpackValue(v.get(bucketAttempts, a.ID))
		if err != nil {
			return err
		}
		if _, _, ok := scanRecordRefs(val); !ok {
			t.Errorf("the stored record is not scanned: %s", val)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
