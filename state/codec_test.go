package state

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A packed value reads back as the JSON packed; plain JSON (format 3 and
// before) reads as itself; a damaged frame is an error, not a panic.
func TestPackValue(t *testing.T) {
	rec, groups, err := encodeRecord(planned("h1", "t1", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append([][]byte{rec}, packValue(groups[0].json), packValue(groups[len(groups)-1].json)) {
		if !packed(v) {
			t.Fatalf("stored value %q is not compressed", v)
		}
		plain, err := unpackValue(v)
		if err != nil || !json.Valid(plain) {
			t.Fatalf("unpackValue = %q, %v", plain, err)
		}
		if again := packValue(plain); !bytes.Equal(again, v) {
			t.Errorf("packing %q twice gives two values", plain)
		}
		if len(v) >= len(plain) {
			t.Errorf("%d bytes packed from %d", len(v), len(plain))
		}
	}
	plain := []byte(`{"id":"x"}`)
	if got, err := unpackValue(plain); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("unpackValue(plain JSON) = %q, %v", got, err)
	}
	for _, bad := range [][]byte{rec[:len(rec)/2], append(append([]byte(nil), zstdMagic...), 0xff, 0xff, 0xff), zstdMagic} {
		if got, err := unpackValue(bad); err == nil {
			t.Errorf("unpackValue(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := decodeRecord("x", rec[:len(rec)-3], nil); err == nil {
		t.Errorf("decodeRecord of a truncated record: no error")
	}
	// Beyond what a reader would decompress: kept as JSON.
	huge := append(append([]byte(`"`), bytes.Repeat([]byte("x"), maxPacked)...), '"')
	if v := packValue(huge); packed(v) {
		t.Errorf("a value of %d bytes was compressed: no reader would decompress it", len(huge))
	}
}

func BenchmarkPackRecord(b *testing.B) {
	a := planned("h1", "t1", 1)
	rec, _, err := encodeRecord(a)
	if err != nil {
		b.Fatal(err)
	}
	plain, _ := unpackValue(rec)
	b.Run("pack", func(b *testing.B) {
		for b.Loop() {
			packValue(plain)
		}
	})
	b.Run("unpack", func(b *testing.B) {
		for b.Loop() {
			if _, err := unpackValue(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("changeAttempt", func(b *testing.B) {
		// What a transition costs in apply: the record decoded and
		// encoded again.
		for b.Loop() {
			a, sm, err := decodeStored(a.ID, rec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := encodeStored(a, sm); err != nil {
				b.Fatal(err)
			}
		}
	})
}
