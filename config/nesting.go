package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxNesting is how deeply brackets, braces, parentheses, blocks, strings
// and template interpolations may nest in one HCL file or expression. HCL's
// parser descends once per level, so a file of 100,000 nested brackets
// would exhaust the stack and kill hemra; real configurations nest a dozen
// levels at most.
const MaxNesting = 256

// CheckNesting refuses HCL source that nests deeper than MaxNesting, before
// it is parsed. It reads the source with HCL's own scanner, which does not
// recurse, so brackets inside strings and comments are not counted, and
// points at the token that went one level too deep.
func CheckNesting(src []byte, filename string, start hcl.Pos) hcl.Diagnostics {
	return checkNesting(hclsyntax.LexConfig, src, filename, start)
}

// CheckExpressionNesting is CheckNesting for a lone expression (a -var
// value).
func CheckExpressionNesting(src []byte, filename string, start hcl.Pos) hcl.Diagnostics {
	return checkNesting(hclsyntax.LexExpression, src, filename, start)
}

func checkNesting(lex func([]byte, string, hcl.Pos) (hclsyntax.Tokens, hcl.Diagnostics), src []byte, filename string, start hcl.Pos) hcl.Diagnostics {
	tokens, _ := lex(src, filename, start) // lexing errors are the parser's to report
	depth := 0
	for _, t := range tokens {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
			if depth > MaxNesting {
				rng := t.Range
				return hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Nesting too deep",
					Detail: fmt.Sprintf("Brackets, braces, parentheses, blocks, strings and template interpolations nest more than %d levels deep at line %d, column %d. "+
						"hemra refuses such a file before parsing it: parsing it would exhaust the stack.", MaxNesting, rng.Start.Line, rng.Start.Column),
					Subject: &rng,
				}}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
