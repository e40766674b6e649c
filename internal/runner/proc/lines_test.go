package proc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type line struct {
	text string
	cut  bool
}

func collect(t *testing.T, r io.Reader, limit int) ([]line, int, int, error) {
	t.Helper()
	var got []line
	n, cut, err := readLines(r, limit, func(l []byte, truncated bool) {
		got = append(got, line{string(l), truncated})
	})
	return got, n, cut, err
}

func TestReadLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		in    string
		limit int
		want  []line
	}{
		{"empty", "", 10, nil},
		{"lines", "a\nbb\n\nccc\n", 10, []line{{"a", false}, {"bb", false}, {"", false}, {"ccc", false}}},
		{"crlf", "a\r\nb\n", 10, []line{{"a", false}, {"b", false}}},
		{"last line without newline", "a\nb", 10, []line{{"a", false}, {"b", false}}},
		{"exactly the limit", "12345\n", 5, []line{{"12345", false}}},
		{"one past the limit", "123456\nok\n", 5, []line{{"12345", true}, {"ok", false}}},
		{"cut last line without newline", "123456", 5, []line{{"12345", true}}},
		{"limit 0", "ab\n\n", 0, []line{{"", true}, {"", false}}},
	}
	for _, c := range cases {
		for _, mode := range []string{"whole", "one byte at a time"} {
			var r io.Reader = strings.NewReader(c.in)
			if mode != "whole" {
				r = iotest.OneByteReader(r)
			}
			got, n, cut, err := collect(t, r, c.limit)
			if err != nil {
				t.Fatalf("%s (%s): %v", c.name, mode, err)
			}
			wantCut := 0
			for _, l := range c.want {
				if l.cut {
					wantCut++
				}
			}
			if len(got) != len(c.want) || n != len(c.want) || cut != wantCut {
				t.Fatalf("%s (%s): got %+v (%d lines, %d cut), want %+v", c.name, mode, got, n, cut, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("%s (%s): line %d = %+v, want %+v", c.name, mode, i, got[i], c.want[i])
				}
			}
		}
	}
}

// TestReadLinesHuge: a line of 40 MiB, far beyond any buffer, arrives whole
// under a higher cap, and is cut (the next line intact) under a lower one.
func TestReadLinesHuge(t *testing.T) {
	t.Parallel()
	huge := bytes.Repeat([]byte("x"), 40<<20)
	in := append(append([]byte("before\n"), huge...), []byte("\nafter\n")...)

	got, _, _, err := collect(t, bytes.NewReader(in), DefaultMaxLine)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].text != "before" || got[1].text != string(huge) || got[1].cut || got[2].text != "after" {
		t.Fatalf("got %d lines (second %d bytes, cut %v)", len(got), len(got[1].text), got[1].cut)
	}

	got, _, cut, err := collect(t, bytes.NewReader(in), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[1].text) != 1<<20 || !got[1].cut || got[2].text != "after" || cut != 1 {
		t.Fatalf("got %d lines (second %d bytes, cut %v)", len(got), len(got[1].text), got[1].cut)
	}
}

// TestReadLinesError: a read error ends the reading, after the partial
// line, and is returned.
func TestReadLinesError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("a\npart"), iotest.ErrReader(boom))
	got, _, _, err := collect(t, r, 10)
	if !errors.Is(err, boom) || len(got) != 2 || got[1].text != "part" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
