package budget

import (
	"encoding/json"
	"math/big"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestParseDollars: amounts are read exactly from the number's text; what a
// micro-USD cannot hold is refused, never rounded (1e-9 used to be stored as
// 0, 0.0000015 as 0.000002).
func TestParseDollars(t *testing.T) {
	t.Parallel()
	ok := map[string]Dollars{
		"0": 0, "-0": 0, "0.0": 0, "0e5": 0, "0.000e-99999999999999999999": 0,
		"5": 5_000_000, "50": 50_000_000, "0.015": 15_000, "0.000001": 1, "1e-6": 1, "10e-7": 1, "0.0000010": 1,
		"1.5e3": 1_500_000_000, "1E2": 100_000_000, "1e+2": 100_000_000, "1000000": 1_000_000_000_000, "1e6": 1_000_000_000_000,
		"999999.999999": 999_999_999_999, "0.1": 100_000, "0.2": 200_000, "0.3": 300_000, "12345.678901": 12_345_678_901,
		"100000000000000000000e-20": 1_000_000,
	}
	for s, want := range ok {
		got, err := ParseDollars(s)
		if err != nil || got != want {
			t.Errorf("ParseDollars(%s) = %d, %v; want %d", s, got, err, want)
		}
	}
	bad := map[string]string{
		"1e-9":                 "not a whole number of millionths",
		"0.0000015":            "not a whole number of millionths",
		"0.0000010000000001":   "not a whole number of millionths",
		"1e-99999999999999999": "not a whole number of millionths",
		"-5":                   "negative",
		"-0.000001":            "negative",
		"1000000.000001":       "more than 1000000",
		"1e7":                  "more than 1000000",
		"1e99999999999999999":  "more than 1000000",
		"1e400":                "more than 1000000",
		"9223372036854775807":  "more than 1000000",
		`"5"`:                  "must be a number",
		"true":                 "must be a number",
		"null":                 "must be a number",
	}
	for s, want := range bad {
		if got, err := ParseDollars(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDollars(%s) = %d, %v; want an error with %q", s, got, err, want)
		}
	}
}

// TestDollarsJSON: written exactly, read back the same.
func TestDollarsJSON(t *testing.T) {
	t.Parallel()
	for d, want := range map[Dollars]string{0: "0", 1: "0.000001", 15_000: "0.015", 5_000_000: "5", 1_234_567: "1.234567", MaxMicros: "1000000"} {
		b, err := json.Marshal(d)
		if err != nil || string(b) != want {
			t.Errorf("%d: %s %v, want %s", d, b, err, want)
		}
		var back Dollars
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("%s read back as %d, %v", b, back, err)
		}
	}
}

// FuzzParseDollars: ParseDollars agrees with exact rational arithmetic on
// every JSON number (of a modest exponent): it accepts exactly the whole
// numbers of millionths from 0 to MaxDollars, with their value.
func FuzzParseDollars(f *testing.F) {
	for _, s := range []string{"0", "5", "0.015", "1e-6", "1e-9", "0.0000015", "-1", "1e6", "1000000.000001", "12.5e-3", "0.10e1", "-0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil || string(n) != s {
			return // not a JSON number as such
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err != nil || e > 60 || e < -60 {
				return // big.Rat would compute 10^e
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", s)
		}
		micros := new(big.Rat).Mul(r, big.NewRat(1_000_000, 1))
		want := micros.IsInt() && micros.Sign() >= 0 && micros.Num().Cmp(big.NewInt(int64(MaxMicros))) <= 0
		got, err := ParseDollars(s)
		switch {
		case want && (err != nil || got.Micros() != micros.Num().Int64()):
			t.Fatalf("ParseDollars(%s) = %d, %v; want %s", s, got, err, micros.Num())
		case !want && err == nil:
			t.Fatalf("ParseDollars(%s) = %d, want an error", s, got)
		}
	})
}

// What no JSON number looks like is refused, never a panic; a negative
// amount is written with its sign; an exponent that would make a number of
// a billion digits is refused without building it.
func TestParseDollarsEdges(t *testing.T) {
	for _, s := range []string{"", ".5", "+5", "e5", "5x", "-", "-.5", "-e5"} {
		if got, err := ParseDollars(s); err == nil || !strings.Contains(err.Error(), "must be a number") {
			t.Errorf("ParseDollars(%q) = %d, %v; want an error saying it must be a number", s, got, err)
		}
	}
	if got := Dollars(-1_500_000).String(); got != "-1.5" {
		t.Errorf("String() = %q, want -1.5", got)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ParseDollars("1e100000000")
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("1e100000000: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 10<<20 {
		t.Errorf("refusing 1e100000000 allocated %d bytes", n)
	}
}

// USD writes micro-USD as dollars and cents, as the budget's reasons say.
func TestUSD(t *testing.T) {
	for m, want := range map[int64]string{0: "$0.00", 5_020_000: "$5.02", 1_234: "$0.00", 999_999_999: "$1000.00"} {
		if got := USD(m); got != want {
			t.Errorf("USD(%d) = %q, want %q", m, got, want)
		}
	}
	v := Check(Limits{PerTicket: ptr(5_000_000)}, Spend{Ticket: 5_020_000})
	if v.Reason != "the ticket budget is used up: spent $5.02 of $5.00" {
		t.Errorf("reason %q", v.Reason)
	}
	v = Check(Limits{PerDay: ptr(50_000_000)}, Spend{Day: 50_000_000})
	if v.Reason != "the project's daily budget is used up: spent $50.00 of $50.00 today" {
		t.Errorf("reason %q", v.Reason)
	}
}
