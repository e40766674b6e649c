package text

import (
	"strings"
	"testing"
)

func TestLineAndMultiline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s               string
		line, multiline string // "" when accepted, else part of the message
	}{
		{"Add a health endpoint", "", ""},
		{"héllo wörld 😀 中文 \u200d", "", ""},
		{"", "", ""},
		{"a\nb", "U+000A at byte 1", ""},
		{"a\tb", "U+0009", ""},
		{"a\x00b", "U+0000 at byte 1", "U+0000 at byte 1"},
		{"\x1b[2Jcleared", "U+001B at byte 0", "U+001B at byte 0"},
		{"a\r\nb", "U+000D", "U+000D"},
		{"a\x7f", "U+007F", "U+007F"},
		{"a\u0085b", "U+0085", "U+0085"}, // NEL (C1)
		{"a\u009bb", "U+009B", "U+009B"}, // CSI (C1)
		{"a\u2028b", "U+2028", ""},
		{"a\u2029b", "U+2029", ""},
		{"a\xffb", "valid UTF-8", "valid UTF-8"},
		{"\xed\xa0\x80", "valid UTF-8", "valid UTF-8"}, // a surrogate, encoded
	}
	for _, c := range cases {
		for _, k := range []struct {
			name  string
			check func(string) error
			want  string
		}{{"Line", Line, c.line}, {"Multiline", Multiline, c.multiline}} {
			err := k.check(c.s)
			switch {
			case k.want == "" && err != nil:
				t.Errorf("%s(%q): %v", k.name, c.s, err)
			case k.want != "" && (err == nil || !strings.Contains(err.Error(), k.want)):
				t.Errorf("%s(%q): %v, want an error with %q", k.name, c.s, err, k.want)
			}
		}
	}
}
