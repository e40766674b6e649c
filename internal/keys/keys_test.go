package keys

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestProjectKeys(t *testing.T) {
	for _, k := range []string{"AC", "ACME", "A1", "ABCDEFGHIJ", "X9Z"} {
		if err := ValidateProject(k); err != nil {
			t.Errorf("%q rejected: %v", k, err)
		}
	}
	for _, k := range []string{"", "A", "acme", "1ACME", "ABCDEFGHIJK", "AC-ME", "ACMÉ", "AC ME"} {
		if err := ValidateProject(k); err == nil {
			t.Errorf("%q accepted", k)
		}
	}
}

func TestItemKeys(t *testing.T) {
	p, n, err := ParseItem("ACME-42")
	if err != nil || p != "ACME" || n != 42 || Item(p, n) != "ACME-42" {
		t.Fatalf("%q %d %v", p, n, err)
	}
	for _, k := range []string{"ACME", "ACME-", "ACME-0", "ACME-042", "acme-1", "ACME--1", "ACME-1x", "ACME-+1", "ACME- 1", "-1", "ACME-99999999999999999999"} {
		if _, _, err := ParseItem(k); err == nil {
			t.Errorf("%q accepted", k)
		}
	}
}

func FuzzParseItem(f *testing.F) {
	for _, s := range []string{"ACME-42", "A-1", "ACME-0", "X-", "AB-9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, n, err := ParseItem(s)
		if err != nil {
			return
		}
		if ValidateProject(p) != nil || n < 1 || Item(p, n) != s || !strings.HasPrefix(s, p+"-") {
			t.Fatalf("%q parsed to %q %d", s, p, n)
		}
	})
}

// TestKeysNeverLookLikeIDs: projects and items are found "by key or id", so
// no key may equal an id (a UUID, in any case or form).
func TestKeysNeverLookLikeIDs(t *testing.T) {
	for range 100 {
		id := uuid.Must(uuid.NewV7()).String()
		for _, s := range []string{id, strings.ToUpper(id), strings.ReplaceAll(id, "-", ""), strings.ToUpper(strings.ReplaceAll(id, "-", ""))} {
			if ValidateProject(s) == nil {
				t.Fatalf("project key %q looks like an id", s)
			}
			if _, _, err := ParseItem(s); err == nil {
				t.Fatalf("item key %q looks like an id", s)
			}
		}
	}
}
