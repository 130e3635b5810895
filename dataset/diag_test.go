package dataset

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// diagLines renders diagnostics one per line the way the expected-errors
// files hold them: "file:line,col: Summary", or "file: Summary" when the
// diagnostic has no position, or ": Summary" when it has no subject.
// Warnings are prefixed with "warning: ".
func diagLines(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		var b strings.Builder
		if d.Severity == hcl.DiagWarning {
			b.WriteString("warning: ")
		}
		if d.Subject != nil {
			b.WriteString(strings.ReplaceAll(d.Subject.Filename, "\\", "/"))
			if d.Subject.Start.Line > 0 {
				fmt.Fprintf(&b, ":%d,%d", d.Subject.Start.Line, d.Subject.Start.Column)
			}
		}
		fmt.Fprintf(&b, ": %s", d.Summary)
		out = append(out, b.String())
	}
	return out
}
