package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/text"
)

// fragments are pieces of text that YAML treats specially somewhere.
var fragments = []string{
	"", "a", "review", "yes", "No", "on", "y", "123", "-7", "1.5", "1e3", ".inf", "true", "~", "null", "$done", "$question",
	"- x", "-", "# c", " #c", "a: b", ":", "[x]", "{y}", "'q'", `"dq"`, "  lead", "trail  ", "\t", "\n", "\n\n",
	"\r\n", "\r", "é", "✓", "\u2028", "\u0085", "\ufeff", "🎉", "%", "@", "`", "!tag", "&anchor", "*alias", "|", ">",
	"---", "...", "0x1F", "0o17", "1_000", "2024-01-01", "<<", "=", "?", ", ", "\x00", "\x1b", "\x7f", "\\", "\\n",
	"Implement the ticket so that every acceptance criterion holds.", "line one\nline two\n", "  indented\nnext",
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(5) {
		if r.IntN(6) == 0 {
			b.WriteRune(rune(r.IntN(0x3000)))
		} else {
			b.WriteString(fragments[r.IntN(len(fragments))])
		}
	}
	s := b.String()
	if !utf8.ValidString(s) { // a lone surrogate rune becomes U+FFFD anyway
		s = strings.ToValidUTF8(s, "?")
	}
	return s
}

func randomID(r *rand.Rand) string {
	const first, rest = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789_-"
	b := []byte{first[r.IntN(len(first))]}
	for range r.IntN(10) {
		b = append(b, rest[r.IntN(len(rest))])
	}
	return string(b)
}

// randomLine and randomMultiline are random texts within the rules of
// package text: control characters (and, on one line, line breaks) dropped.
func randomLine(r *rand.Rand) string {
	return strings.Map(func(c rune) rune {
		if text.Line(string(c)) != nil {
			return -1
		}
		return c
	}, randomText(r))
}

func randomMultiline(r *rand.Rand) string {
	return strings.Map(func(c rune) rune {
		if text.Multiline(string(c)) != nil {
			return -1
		}
		return c
	}, randomText(r))
}

// randomDefinition builds a definition that respects every per-field rule;
// the graph rules may still fail (the caller filters with Validate).
func randomDefinition(r *rand.Rand) Definition {
	var d Definition
	if r.IntN(2) == 0 {
		d.MaxIterations = 1 + r.IntN(MaxMaxIterations)
	}
	n := 1 + r.IntN(7)
	seen := map[string]bool{}
	for len(d.Stages) < n {
		id := randomID(r)
		if seen[id] {
			continue
		}
		seen[id] = true
		s := Stage{ID: id}
		if r.IntN(2) == 0 {
			s.Name = randomLine(r)
		}
		switch r.IntN(4) {
		case 0:
			s.Kind = KindHuman
		case 1:
			s.Kind, s.Action = KindPlatform, ActionMerge
		default:
			s.Kind = KindAgent
			s.Adapter = []string{"", AdapterClaudeCode, AdapterOpenCode}[r.IntN(3)]
			if r.IntN(2) == 0 {
				s.Model = randomLine(r)
			}
			skills := map[string]bool{}
			for range r.IntN(4) {
				sk := randomLine(r)
				if strings.TrimSpace(sk) != "" && !skills[sk] {
					skills[sk] = true
					s.Skills = append(s.Skills, sk)
				}
			}
			for i := range r.IntN(3) {
				s.Knowledge = append(s.Knowledge, fmt.Sprintf("notes/k%d", i))
			}
			s.Instructions = randomMultiline(r)
			if r.IntN(3) == 0 {
				s.TimeoutMinutes = 1 + r.IntN(MaxTimeoutMinutes)
			}
		}
		d.Stages = append(d.Stages, s)
	}
	ids := make([]string, 0, n)
	for _, s := range d.Stages {
		ids = append(ids, s.ID)
	}
	target := func() string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return TargetDone
		case 2:
			return TargetFailed
		case 3:
			return TargetQuestion
		}
		return ids[r.IntN(len(ids))]
	}
	for i := range d.Stages {
		if r.IntN(3) == 0 {
			d.Stages[i].Next.Done = target()
		}
		if r.IntN(2) == 0 {
			d.Stages[i].Next.Failed = target()
		}
		if r.IntN(3) == 0 {
			d.Stages[i].Next.Blocked = target()
		}
	}
	return d
}

// arbitraryDefinition builds any definition, valid or not (valid UTF-8).
func arbitraryDefinition(r *rand.Rand) Definition {
	d := Definition{MaxIterations: r.IntN(60) - 20}
	if r.IntN(20) == 0 {
		d.MaxIterations = int(r.Int64()) - int(r.Int64())
	}
	for range r.IntN(5) {
		s := Stage{ID: randomText(r), Kind: randomText(r), Name: randomText(r), Adapter: randomText(r), Model: randomText(r),
			Instructions: randomText(r), Action: randomText(r), TimeoutMinutes: r.IntN(200) - 100,
			Next: Next{Done: randomText(r), Failed: randomText(r), Blocked: randomText(r)}}
		for range r.IntN(3) {
			s.Skills = append(s.Skills, randomText(r))
		}
		for range r.IntN(3) {
			s.Knowledge = append(s.Knowledge, randomText(r))
		}
		d.Stages = append(d.Stages, s)
	}
	return d
}

func roundTrip(t *testing.T, d Definition) []byte {
	t.Helper()
	out, err := Render(d)
	if err != nil {
		t.Fatalf("render %#v: %v", d, err)
	}
	back, _ := Parse(out)
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip changed the definition\nrendered:\n%s\n got %#v\nwant %#v", out, back, d)
	}
	again, err := Render(back)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("render is not stable (%v):\n%s\n%s", err, out, again)
	}
	return out
}

// TestRoundTripValid: many random valid definitions render, parse back clean
// and equal, render to the same bytes, and survive JSON the same way.
func TestRoundTripValid(t *testing.T) {
	valid := 0
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 42))
		for range 50 {
			d := randomDefinition(r)
			if len(Validate(d)) > 0 {
				continue
			}
			valid++
			out := roundTrip(t, d)
			if _, ps := Parse(out); len(ps) > 0 {
				t.Fatalf("valid definition renders to YAML with problems %v:\n%s", ps, out)
			}
			js, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			back, ps := DecodeJSON(js)
			if len(ps) > 0 || !reflect.DeepEqual(back, d) {
				t.Fatalf("JSON round trip: %v\n%s\n got %#v\nwant %#v", ps, js, back, d)
			}
		}
	}
	if valid < 3000 {
		t.Fatalf("only %d valid definitions generated", valid)
	}
	t.Logf("%d valid definitions", valid)
}

// TestRoundTripAny: Render → Parse keeps even definitions that do not
// validate (the UI renders what is being edited).
func TestRoundTripAny(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 7))
		for range 30 {
			roundTrip(t, arbitraryDefinition(r))
		}
	}
}

func TestRenderRejectsInvalidUTF8(t *testing.T) {
	if _, err := Render(Definition{Stages: []Stage{{ID: "a", Kind: KindAgent, Skills: []string{"\xff"}}}}); err == nil {
		t.Fatal("no error")
	}
}

func TestRenderEmpty(t *testing.T) {
	out, err := Render(Definition{})
	if err != nil || string(out) != "stages: []\n" {
		t.Fatalf("%q, %v", out, err)
	}
}
