// Package text is the one rule for the characters of the text Ballet keeps
// from its clients. Every value must be valid UTF-8 without control
// characters: NUL (which C strings and many tools cut at), ESC (which starts
// terminal escape sequences: a title that clears a screen or rewrites a log
// line) and the rest of C0 and C1, and DEL. A single line (a title, a name,
// a subject) holds no line break at all, U+2028 and U+2029 included; a
// multi-line text (a description, an answer, a skill's content) may hold
// line feeds and tabs — but no carriage returns, which can overwrite a line
// on a terminal.
//
// The package is a leaf: every domain, the pure ones included, may use it.
package text

import (
	"fmt"
	"unicode/utf8"
)

// Line checks a single-line value.
func Line(s string) error { return check(s, false) }

// Multiline checks a text that may span lines.
func Multiline(s string) error { return check(s, true) }

func check(s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("must be valid UTF-8")
	}
	for i, r := range s {
		switch {
		case multiline && (r == '\n' || r == '\t'):
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			if multiline {
				return fmt.Errorf("holds the control character %U at byte %d: only line feeds and tabs may appear among the text", r, i)
			}
			return fmt.Errorf("holds the control character %U at byte %d: a single line of text holds none", r, i)
		case !multiline && (r == '\u2028' || r == '\u2029'):
			return fmt.Errorf("holds the line break %U at byte %d: a single line of text holds none", r, i)
		}
	}
	return nil
}
