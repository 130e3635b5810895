package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

var update = flag.Bool("update", false, "rewrite the errors files of testdata/invalid from the current output (review the diff!)")

// fixtureOptions is a fixture's optional options.json.
type fixtureOptions struct {
	Vars            []string `json:"vars"`
	VarFiles        []string `json:"var_files"`
	Environ         []string `json:"environ"`
	SkipTasks       bool     `json:"skip_tasks"`
	StrictVariables bool     `json:"strict_variables"`
	Version         string   `json:"version"`
}

func loadFixture(t *testing.T, dir string) (*Config, hcl.Diagnostics) {
	t.Helper()
	var fo fixtureOptions
	if b, err := os.ReadFile(filepath.Join(dir, "options.json")); err == nil {
		if err := json.Unmarshal(b, &fo); err != nil {
			t.Fatalf("options.json: %v", err)
		}
	}
	return Load(dir, LoadOptions{
		Vars: fo.Vars, VarFiles: fo.VarFiles, Environ: fo.Environ, SkipTasks: fo.SkipTasks,
		UnsetVariablesUnknown: !fo.StrictVariables, Version: fo.Version,
	})
}

// diagLine renders a diagnostic as one line of an errors file:
// "main.hcl:4,3-9: Summary" (one line) or "main.hcl:4,3-5,1: Summary",
// "-: Summary" without a range, and a "warning: " prefix for warnings.
func diagLine(d *hcl.Diagnostic) string {
	where := "-"
	if r := d.Subject; r != nil {
		if r.Start.Line == r.End.Line {
			where = fmt.Sprintf("%s:%d,%d-%d", r.Filename, r.Start.Line, r.Start.Column, r.End.Column)
		} else {
			where = fmt.Sprintf("%s:%d,%d-%d,%d", r.Filename, r.Start.Line, r.Start.Column, r.End.Line, r.End.Column)
		}
	}
	prefix := ""
	if d.Severity == hcl.DiagWarning {
		prefix = "warning: "
	}
	return prefix + where + ": " + d.Summary
}

// TestValidFixtures loads each testdata/valid case and expects no
// diagnostic at all, warnings included.
func TestValidFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/valid/*")
	if len(dirs) == 0 {
		t.Fatal("no valid fixtures")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			_, diags := loadFixture(t, dir)
			for _, d := range diags {
				t.Errorf("unexpected diagnostic %s (%s)", diagLine(d), d.Detail)
			}
		})
	}
}

// TestInvalidFixtures loads each testdata/invalid case and compares its
// diagnostics, ranges included, with the case's errors file.
func TestInvalidFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/invalid/*")
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			_, diags := loadFixture(t, dir)
			var got []string
			for _, d := range diags {
				got = append(got, diagLine(d))
			}
			errorsFile := filepath.Join(dir, "errors")
			if *update {
				if err := os.WriteFile(errorsFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(errorsFile)
			if err != nil {
				t.Fatalf("%v (run go test ./config -run TestInvalidFixtures -update, then review)", err)
			}
			want := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if !diags.HasErrors() {
				t.Errorf("no error diagnostics")
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("diagnostics differ\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				for _, d := range diags {
					t.Logf("%s\n    %s", diagLine(d), d.Detail)
				}
			}
		})
	}
}

// TestShowFixture renders one fixture's diagnostics as users see them:
// HEMRA_SHOW_FIXTURE=invalid/cycle_locals go test ./config -run TestShowFixture -v
func TestShowFixture(t *testing.T) {
	name := os.Getenv("HEMRA_SHOW_FIXTURE")
	if name == "" {
		t.Skip("set HEMRA_SHOW_FIXTURE=invalid/<case> to render a fixture's diagnostics")
	}
	cfg, diags := loadFixture(t, filepath.Join("testdata", name))
	var b strings.Builder
	_ = hcl.NewDiagnosticTextWriter(&b, cfg.Files, 78, false).WriteDiagnostics(diags)
	t.Log("\n" + b.String())
}
