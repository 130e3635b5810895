package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestSensitiveValueRefusedWhereRecorded: a value computed from a
// sensitive variable is accepted only where hemra hands it over without
// recording it (a harness's args); anywhere else (a command line, an
// image, a setting recorded in every manifest) it is an error at load, at
// the attribute, and the message never shows the value.
func TestSensitiveValueRefusedWhereRecorded(t *testing.T) {
	const head = `
variable "token" {
  type      = string
  sensitive = true
}
locals {
  wrapped = "key=${var.token}"
}
sandbox "box" {
  kind = "local"
}
dataset "d" {
  source = "./tasks"
}
`
	for _, tc := range []struct {
		name, body, summary string
	}{
		{"command", `harness "h" {
  command = ["agent", "--key", var.token]
  sandbox = sandbox.box
}`, "Sensitive value in command"},
		{"command through a local", `harness "h" {
  command = ["sh", "-c", local.wrapped]
  sandbox = sandbox.box
}`, "Sensitive value in command"},
		{"sandbox image", `sandbox "img" {
  kind  = "docker"
  image = "registry.example/${var.token}:1"
}`, "Sensitive value in image"},
		{"timeout", `harness "h" {
  builtin = "nop"
  timeout = var.token
}`, "Sensitive value in timeout"},
		{"mcp server command", `harness "h" {
  command = ["agent"]
  sandbox = sandbox.box
  mcp "files" {
    command = ["server", var.token]
  }
}`, "Sensitive value in mcp.files.command"},
	} {
		dir := writeFiles(t, map[string]string{"main.hcl": head + tc.body + "\n", "tasks/.keep": ""})
		cfg, diags := Load(dir, LoadOptions{Vars: []string{"token=s3cr3t-value"}, SkipTasks: true})
		var found *hcl.Diagnostic
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Summary == tc.summary {
				found = d
			}
		}
		if found == nil {
			t.Errorf("%s: no %q error; got %v", tc.name, tc.summary, diags)
			continue
		}
		if found.Subject == nil || found.Subject.Start.Line < 2 {
			t.Errorf("%s: the error does not point at the attribute: %v", tc.name, found.Subject)
		}
		var b strings.Builder
		_ = hcl.NewDiagnosticTextWriter(&b, cfg.Files, 78, false).WriteDiagnostics(diags)
		if strings.Contains(b.String(), "s3cr3t") {
			t.Errorf("%s: the diagnostic shows the value:\n%s", tc.name, b.String())
		}
	}

	// args may carry it: handed over in run.start, recorded by hash only;
	// referring to the harness that holds it is no use of the value.
	dir := writeFiles(t, map[string]string{"main.hcl": head + `
harness "h" {
  command = ["agent"]
  sandbox = sandbox.box
  args    = { key = var.token, note = local.wrapped }
}
eval "e" {
  dataset   = dataset.d
  harnesses = [harness.h]
}
`, "tasks/.keep": ""})
	cfg := mustLoad(t, dir, LoadOptions{Vars: []string{"token=s3cr3t-value"}, SkipTasks: true})
	if !cfg.Harnesses["h"].ArgsSensitive {
		t.Errorf("args built from a sensitive variable are not flagged ArgsSensitive")
	}
}
