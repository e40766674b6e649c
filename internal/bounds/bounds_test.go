package bounds

import (
	"os"
	"strings"
	"testing"
)

// TestDocsHoldTheTable: docs/api.md's "Numbers and their bounds" is the
// table Markdown writes, so the documented bounds are the enforced ones.
func TestDocsHoldTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := Markdown(); !strings.Contains(string(b), want) {
		t.Fatalf("docs/api.md does not hold the bounds table; it should read\n%s", want)
	}
}

// TestBounds: each bound holds its ends and refuses past them, naming the
// field; NaN is never within one.
func TestBounds(t *testing.T) {
	for _, b := range Table {
		if !b.Has(b.Min) || !b.Has(b.Max) || b.Has(b.Max+1) || (b.Min > -1<<63 && b.Has(b.Min-1)) {
			t.Errorf("%s: ends %d..%d", b.Name, b.Min, b.Max)
		}
		if err := b.Err("x.y", b.Max+1); err == nil || !strings.Contains(err.Error(), "x.y") {
			t.Errorf("%s: past its end: %v", b.Name, err)
		}
		if len(b.Fields) == 0 {
			t.Errorf("%s: written nowhere", b.Name)
		}
	}
	if CostUSD.HasFloat(nan()) {
		t.Error("NaN is within the cost bound")
	}
}

func nan() float64 { var z float64; return z / z }
