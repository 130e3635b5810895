package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// currentCases are Current values of every shape: what apply writes
// (NewID ids, SHA-256 fingerprints, known statuses and classes) and what
// only another writer or an old store might hold.
func currentCases() []Current {
	hash := func(s string) string { return fmt.Sprintf("%064x", len(s)) }
	return []Current{
		{},
		{AttemptID: NewID(), AgentFingerprint: hash("a"), VerifyFingerprint: hash("vv"), JudgeFingerprint: hash("jjj"),
			Status: StatusFinished, Class: ClassPassed, SnapshotKept: true},
		{AttemptID: NewID(), AgentFingerprint: hash("a"), VerifyFingerprint: hash("vv"), Status: StatusPending},
		{AttemptID: NewID(), AgentFingerprint: hash("a"), VerifyFingerprint: hash("vv"), JudgeFingerprint: hash("j"),
			Status: StatusErrored, Class: ClassInfraError, JudgeRetry: true},
		{AttemptID: "06h2sb210c01vmv1mh30", AgentFingerprint: "aa", VerifyFingerprint: "bb", JudgeFingerprint: "cc", Status: StatusFinished, Class: ClassPassed, SnapshotKept: true},
		{AttemptID: "x", Status: StatusAgent},
		{AttemptID: `quote"and\backslash`, AgentFingerprint: "ünïcode <&>", Status: "odd", Class: "odd too"},
		// Shapes that are not raw: upper-case hex, one digit short or
		// over, an id that does not encode back to itself.
		{AttemptID: "06h2sb210c01vmv1mh3z", AgentFingerprint: strings.ToUpper(hash("a")), VerifyFingerprint: hash("a")[1:],
			JudgeFingerprint: hash("a") + "0", Status: "", Class: ClassTaskError},
		{AttemptID: "06H2SB210C01VMV1MH30", AgentFingerprint: "sha256:" + hash("a"), Status: StatusInterrupted, Class: ClassInterrupted},
		{AttemptID: "bad\xffutf8", AgentFingerprint: strings.Repeat("g", 64), VerifyFingerprint: strings.Repeat("x", 300), Status: StatusJudge},
	}
}

// A Current value reads back exactly as written, in the binary form of
// format 5 and in the JSON of format 4, and each form has one encoding.
func TestCurrentRoundTrips(t *testing.T) {
	for _, want := range currentCases() {
		enc, err := encodeCurrent(want)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) == 0 || enc[0] != currentTag {
			t.Fatalf("encodeCurrent(%+v) = %q: not the binary form", want, enc)
		}
		got, err := decodeCurrent(enc)
		if err != nil || got != want {
			t.Errorf("decodeCurrent(%q) = %+v, %v; want %+v", enc, got, err, want)
		}
		if again, _ := encodeCurrent(got); !bytes.Equal(again, enc) {
			t.Errorf("%+v encodes as %q, then as %q", want, enc, again)
		}
		if id, err := currentAttemptID(enc, new([idText]byte)); err != nil || string(id) != want.AttemptID {
			t.Errorf("currentAttemptID(%q) = %q, %v; want %q", enc, id, err, want.AttemptID)
		}
		js, _ := json.Marshal(want)
		var viaJSON Current
		_ = json.Unmarshal(js, &viaJSON) // encoding/json's reading of format 4 (invalid UTF-8 replaced)
		if got, err := decodeCurrent(js); err != nil || got != viaJSON {
			t.Errorf("decodeCurrent(%s) = %+v, %v; want %+v", js, got, err, viaJSON)
		}
	}
}

// What apply writes is a third of its JSON.
func TestCurrentBinaryIsSmall(t *testing.T) {
	c := currentCases()[1]
	enc, _ := encodeCurrent(c)
	js, _ := json.Marshal(c)
	if want := 2 + idRaw + 3*hashRaw + 2; len(enc) != want {
		t.Errorf("binary Current is %d bytes, want %d (JSON: %d)", len(enc), want, len(js))
	}
}

// A binary value with anything out of place is an error, never a Current
// that would encode to other bytes.
func TestCurrentBinaryRefusesOtherForms(t *testing.T) {
	c := currentCases()[1]
	enc, _ := encodeCurrent(c)
	text := func(s string) []byte { return appendText(nil, s) }
	cases := map[string][]byte{
		"tag only":        {currentTag},
		"unknown flag":    append([]byte{currentTag, enc[1] | 0x80}, enc[2:]...),
		"short":           enc[:len(enc)-1],
		"trailing byte":   append(bytes.Clone(enc), 0),
		"status code":     append(bytes.Clone(enc[:len(enc)-2]), byte(len(currentStatuses)+1), 1),
		"class code":      append(bytes.Clone(enc[:len(enc)-1]), byte(len(currentClasses)+1)),
		"long length":     {currentTag, 0, 0x80, 0x00, 1, 1, 1, 1, 1},
		"length too long": {currentTag, 0, 9, 'x', 1, 1, 1, 1, 1},
		// Text where the raw form or a code belongs.
		"id as text":     concat([]byte{currentTag, 0}, text(c.AttemptID), text(""), text(""), text(""), []byte{1, 1}),
		"hash as text":   concat([]byte{currentTag, 0}, text("x"), text(c.AgentFingerprint), text(""), text(""), []byte{1, 1}),
		"status as text": concat([]byte{currentTag, 0}, text("x"), text(""), text(""), text(""), []byte{0}, text("finished"), []byte{1}),
		"class as text":  concat([]byte{currentTag, 0}, text("x"), text(""), text(""), text(""), []byte{1, 0}, text("")),
	}
	for name, val := range cases {
		if got, err := decodeCurrent(val); err == nil {
			t.Errorf("%s: decodeCurrent(%q) = %+v, want an error", name, val, got)
		}
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// A no-op plan decodes one Current per declared attempt: one allocation
// each, for the strings.
func TestCurrentDecodeAllocatesOnce(t *testing.T) {
	enc, _ := encodeCurrent(currentCases()[1])
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeCurrent(enc) }); n > 1 {
		t.Errorf("decodeCurrent allocates %.0f times, want 1", n)
	}
}

func BenchmarkDecodeCurrent(b *testing.B) {
	c := currentCases()[1]
	bin, _ := encodeCurrent(c)
	js, _ := json.Marshal(c)
	for _, f := range []struct {
		name string
		val  []byte
	}{{"binary", bin}, {"json", js}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := decodeCurrent(f.val); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
