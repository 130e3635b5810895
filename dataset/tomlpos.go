package dataset

import "github.com/hashicorp/hcl/v2"

// TOMLKeyRanges maps every dotted key path of a TOML document to the range
// of its value (or of its header, for tables), numbering arrays of tables
// from 0 ("criterion.1.type"). Other TOML files hemra reads (judge.toml)
// point their diagnostics with it, as task.toml's do.
func TOMLKeyRanges(filename string, src []byte) map[string]hcl.Range {
	return keyRanges(filename, src)
}

// TOMLSyntaxDiagnostic turns a go-toml decode error into a diagnostic at the
// line and column go-toml reports, under summary.
func TOMLSyntaxDiagnostic(filename, summary string, src []byte, err error) *hcl.Diagnostic {
	d := tomlSyntaxDiag(filename, src, err)
	d.Summary = summary
	return d
}

// TOMLTypeName names a decoded TOML value's type for a diagnostic ("an
// integer", "a table").
func TOMLTypeName(v any) string { return tomlTypeName(v) }
