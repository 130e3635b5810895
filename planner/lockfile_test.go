package planner

import (
	"strings"
	"testing"
)

// A lock file nested 100,000 levels deep is refused with a diagnostic, not
// a stack overflow in HCL's parser.
func TestDeepLockFileRefused(t *testing.T) {
	src := "image \"x\" {\n  digest = " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n}\n"
	_, diags := ParseLockFile("hemra.lock.hcl", []byte(src))
	if !diags.HasErrors() || diags[0].Summary != "Nesting too deep" {
		t.Errorf("diagnostics %v, want Nesting too deep", diags)
	}
}
