package main

import (
	"strings"
	"unicode"
)

// plainText makes model output and other recorded text safe to print on
// one line of a terminal: control characters (escape sequences, carriage
// returns, newlines) become spaces, so a judge's reasoning that quotes an
// agent's output can neither move the cursor nor forge a line.
func plainText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
}
