package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDriverMustBeExecutable: a driver names an executable file or a
// folder holding an executable named driver; anything else is refused
// where it is written, saying why.
func TestDriverMustBeExecutable(t *testing.T) {
	for _, tc := range []struct {
		name, driver, want string
		files              map[string]os.FileMode
	}{
		{"file", "drivers/x", "", map[string]os.FileMode{"drivers/x": 0o755}},
		{"folder", "drivers/y", "", map[string]os.FileMode{"drivers/y/driver": 0o755, "drivers/y/lib.txt": 0o644}},
		{"missing", "drivers/z", "not found in the eval directory", nil},
		{"not executable", "drivers/x", "is not executable", map[string]os.FileMode{"drivers/x": 0o644}},
		{"folder without driver", "drivers/y", "must hold an executable named driver", map[string]os.FileMode{"drivers/y/run": 0o755}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"main.hcl": `
harness "d" {
  driver = "` + tc.driver + `"
}
`})
			for name, mode := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
					t.Fatal(err)
				}
			}
			cfg, diags := Load(dir, LoadOptions{})
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				h := cfg.Harnesses["d"]
				wantFile := filepath.Base(tc.driver)
				if strings.HasSuffix(tc.name, "folder") {
					wantFile = "driver"
				}
				if h.DriverSource != filepath.Join(dir, tc.driver) || h.DriverFile != wantFile {
					t.Errorf("driver decoded as source %q file %q", h.DriverSource, h.DriverFile)
				}
				return
			}
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "main.hcl:3") {
				t.Errorf("diagnostics %v, want an error at main.hcl:3 saying %q", diags, tc.want)
			}
		})
	}
}
