package planner

import (
	"strings"
	"testing"

	"github.com/hemra-dev/hemra/config"
	"github.com/hemra-dev/hemra/sandbox"
	"github.com/hemra-dev/hemra/state"
)

// A setting a provider records in the manifest's sandbox settings
// (task_defaults) and the verifier's mode among the inputs show in the
// isolation summary, and split entries that differ by them.
func TestIsolationReadsWhatTheManifestRecords(t *testing.T) {
	p := newPlanner(&config.Config{}, EmptyPrior(), Options{Require: []string{"network_block"}})
	eval := &config.Eval{Name: "harbor", Verifier: &config.Verifier{Network: "none"}}
	settings := sandbox.WithDefaults(sandbox.Settings{Kind: config.KindDocker}, nil)
	his := map[string]*harnessInfo{}
	attempt := func(harness, rawSettings, mode string, loosenings ...string) *declared {
		hi := his[harness]
		if hi == nil {
			hi = &harnessInfo{settings: settings, offered: sandbox.CapabilitiesFor(settings)}
			his[harness] = hi
		}
		d := &declared{eval: eval, h: &config.Harness{Name: harness}, hi: hi}
		d.pa = PlannedAttempt{Eval: eval.Name, Harness: harness, Manifest: &state.Manifest{
			Sandbox: state.SandboxRecord{Kind: "docker", Settings: []byte(rawSettings), Loosenings: loosenings},
		}}
		if mode != "" {
			d.pa.Manifest.Inputs = []state.Input{{Stage: StageVerify, Path: "verifier.mode", Value: `"` + mode + `"`}}
		}
		d.iso = isoNoteOf(d.pa.Manifest) // as finish notes it
		return d
	}
	harbor := `{"kind":"docker","network":"none","task_defaults":"harbor"}`
	loose := `task_defaults = "harbor" (Harbor task containers run as the image's USER)`
	isos := p.isolation([]*declared{
		attempt("oracle", harbor, "shared", loose),
		attempt("oracle", harbor, "shared", loose),
		attempt("agent", `{"kind":"docker","network":"none"}`, ""),
	})
	if len(isos) != 2 {
		t.Fatalf("%d entries, want 2: %+v", len(isos), isos)
	}
	var h *Isolation
	for _, iso := range isos {
		if iso.TaskDefaults == "harbor" {
			h = iso
		}
	}
	if h == nil || h.VerifierMode != "shared" || h.Attempts != 2 || len(h.Loosenings) != 1 || h.UsedBy[0] != "harbor/oracle" {
		t.Fatalf("the harbor entry: %+v", h)
	}
	if strings.Join(h.Required, ",") != "network_block" || h.Memory.Min != float64(sandbox.DefaultDockerMemory) {
		t.Errorf("required %v, memory %+v", h.Required, h.Memory)
	}
	words := strings.Join(isolationLines(h), "\n")
	for _, want := range []string{"task defaults harbor", "verifier: network none, mode shared", "requires network_block"} {
		if !strings.Contains(words, want) {
			t.Errorf("no %q in:\n%s", want, words)
		}
	}
}

func TestLimitRanges(t *testing.T) {
	var r Range
	for i, v := range []float64{2 << 30, 1 << 30, 4 << 30} {
		widen(&r, v, i+1)
	}
	if r != (Range{1 << 30, 4 << 30}) || rangeWords(r, formatBytes) != "1 GiB–4 GiB" {
		t.Errorf("%+v %q", r, rangeWords(r, formatBytes))
	}
	widen(&r, 0, 4)
	if r != (Range{1 << 30, 0}) || rangeWords(r, formatBytes) != "1 GiB to no limit" {
		t.Errorf("with an unlimited attempt: %+v %q", r, rangeWords(r, formatBytes))
	}
	if got := rangeWords(Range{}, formatNumber); got != "no limit" {
		t.Errorf("no limit: %q", got)
	}
	if got := union(Range{2, 2}, Range{1, 3}); got != (Range{1, 3}) {
		t.Errorf("union %+v", got)
	}
}
