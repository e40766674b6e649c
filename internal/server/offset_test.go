package server

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
)

func TestParseOffset(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "7": 7, "007": 7, "999999999999999999": 999999999999999999} {
		if n, err := parseOffset(s, true); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", s, n, err, want)
		}
	}
	if n, err := parseOffset("", false); err != nil || n != 0 {
		t.Errorf("absent, optional: %d, %v", n, err)
	}
	for _, s := range []string{"", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "abc", "١", "1000000000000000000", "9223372036854775808",
		strings.Repeat("9", 500)} {
		_, err := parseOffset(s, true)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.Invalid || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != "offset" {
			t.Errorf("%q: %v, want a 400 naming offset", s, err)
			continue
		}
		if len(ae.Message) > 200 {
			t.Errorf("%q: a message of %d bytes", s, len(ae.Message))
		}
	}
}

// FuzzParseOffset: whatever a client sends, the answer is a number it
// wrote in plain decimal digits or a 400 naming offset — never a panic.
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{"0", "12", "-1", "+3", "1e9", "999999999999999999", "9999999999999999999", "", " ", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseOffset(s, true)
		if err != nil {
			if apperr.Code(err) != apperr.Invalid || !strings.HasPrefix(err.Error(), "offset: ") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if n < 0 || strings.TrimLeft(strconv.FormatInt(n, 10), "0") != strings.TrimLeft(s, "0") {
			t.Fatalf("%q read as %d", s, n)
		}
	})
}
