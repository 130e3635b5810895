package dataset

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every task.toml of the repository's tests and examples comes back from
// the hash cache's encoding deeply equal to its parse.
func TestTaskConfigEncodingRoundTrips(t *testing.T) {
	var files []string
	filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "task.toml" {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 20 {
		t.Fatalf("found only %d task.toml files", len(files))
	}
	encoded := 0
	for _, p := range files {
		src, err := os.ReadFile(p)
		must(t, err)
		cfg, diags := ParseTaskConfig(p, src)
		if cfg == nil || len(diags) > 0 {
			continue
		}
		enc, ok := appendTaskConfig(nil, cfg)
		if !ok {
			continue // a date, say: parsed every time
		}
		back, ok := decodeTaskConfig(enc)
		if !ok || !reflect.DeepEqual(back, cfg) {
			t.Fatalf("%s: decoded %+v, parsed %+v", p, back, cfg)
		}
		encoded++
	}
	if encoded < 20 {
		t.Fatalf("only %d of %d task.toml files encoded", encoded, len(files))
	}
}

// What the encoding must keep apart, and what it must refuse rather than
// carry approximately.
func TestTaskConfigEncodingEdges(t *testing.T) {
	neg := math.Copysign(0, -1)
	exact := []*TaskConfig{
		{},
		{Metadata: map[string]any{}, Steps: []StepConfig{}, Agent: AgentConfig{Env: map[string]string{}}},
		{Metadata: map[string]any{"n": int64(2), "f": 2.0, "list": []any{}, "nil list": []any(nil), "t": map[string]any{"b": true, "s": ""}}},
		{Agent: AgentConfig{TimeoutSec: neg}, Environment: EnvConfig{AllowInternet: new(false), CPUs: math.MaxFloat64, MemoryMB: -1}},
		{Steps: []StepConfig{{Name: "a", MinReward: new(0.5), Extra: map[string]any{}}, {Name: "b", Agent: &AgentConfig{}}}},
	}
	for i, cfg := range exact {
		enc, ok := appendTaskConfig(nil, cfg)
		if !ok {
			t.Fatalf("%d: not encoded", i)
		}
		back, ok := decodeTaskConfig(enc)
		if !ok || !reflect.DeepEqual(back, cfg) {
			t.Fatalf("%d: decoded %+v, want %+v", i, back, cfg)
		}
		if math.Signbit(back.Agent.TimeoutSec) != math.Signbit(cfg.Agent.TimeoutSec) {
			t.Fatalf("%d: the sign of a zero was lost", i)
		}
		for cut := range len(enc) {
			if _, ok := decodeTaskConfig(enc[:cut]); ok {
				t.Fatalf("%d: a truncated encoding (%d of %d bytes) decoded", i, cut, len(enc))
			}
		}
	}
	src := []byte("version = \"1.0\"\n[metadata]\ncreated = 2024-05-01\n")
	cfg, diags := ParseTaskConfig("task.toml", src)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if _, ok := appendTaskConfig(nil, cfg); ok {
		t.Fatal("a TOML date was encoded")
	}
	if _, ok := appendTaskConfig(nil, &TaskConfig{Metadata: map[string]any{"x": math.NaN()}}); ok {
		t.Fatal("a NaN was encoded (it never equals itself, so no decoding can be checked)")
	}
	if id := parseIdentity(); strings.Count(string(id[:]), "\x00") == len(id) {
		t.Fatal("no parse identity")
	}
}
