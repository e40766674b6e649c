package budget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Dollars is an amount of US dollars held exactly, in millionths
// (micro-USD): budgets are stored so. Its JSON form is a number of dollars
// (5, 0.015), written exactly. Decoding takes the number's text as sent and
// refuses what cannot be held exactly — 1e-9, 0.0000015 — rather than round
// it, and amounts below 0 or above MaxDollars.
type Dollars int64

// MaxDollars is the largest amount a budget may be, in dollars.
const MaxDollars = 1_000_000

// MaxMicros is MaxDollars in micro-USD.
const MaxMicros Dollars = MaxDollars * 1_000_000

// Micros returns the amount in micro-USD.
func (d Dollars) Micros() int64 { return int64(d) }

// String writes the amount as a decimal number of dollars, exactly, with
// no trailing zeros: 5, 0.015, 0.000001.
func (d Dollars) String() string {
	m := int64(d)
	sign := ""
	if m < 0 {
		sign, m = "-", -m // MinInt64 is never a budget
	}
	s := fmt.Sprintf("%s%d.%06d", sign, m/1_000_000, m%1_000_000)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// JSONSchema is the amount's schema in the OpenAPI document.
func (Dollars) JSONSchema() map[string]any {
	return map[string]any{"type": "number", "minimum": 0, "maximum": MaxDollars, "multipleOf": 0.000001}
}

// Spent is a sum of runs' costs in micro-USD, written as Dollars are but
// without Dollars' maximum: a sum of many runs is no budget. Budget reads
// saturate it at the largest int64 (see Service.usage).
type Spent int64

// JSONSchema is the sum's schema in the OpenAPI document.
func (Spent) JSONSchema() map[string]any {
	return map[string]any{"type": "number", "minimum": 0, "multipleOf": 0.000001}
}

// MarshalJSON writes the sum as a JSON number of dollars.
func (s Spent) MarshalJSON() ([]byte, error) { return Dollars(s).MarshalJSON() }

// MarshalJSON writes the amount as a JSON number of dollars.
func (d Dollars) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalJSON reads a JSON number of dollars exactly (see Dollars).
func (d *Dollars) UnmarshalJSON(b []byte) error {
	m, err := ParseDollars(string(b))
	if err != nil {
		return err
	}
	*d = m
	return nil
}

// ParseDollars reads a JSON number of dollars exactly, into micro-USD: the
// number must be a whole number of millionths from 0 to MaxDollars.
func ParseDollars(s string) (Dollars, error) {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, fmt.Errorf("must be a number of US dollars, not %.20s", s)
	}
	tooBig := fmt.Errorf("%.30s is more than %d US dollars", s, MaxDollars)
	notExact := fmt.Errorf("%.30s is not a whole number of millionths of a dollar (at most 6 decimals: 0.000001)", s)
	neg := strings.HasPrefix(s, "-")
	mantissa, exponent, hasExp := strings.Cut(strings.TrimPrefix(s, "-"), "e")
	if !hasExp {
		mantissa, exponent, hasExp = strings.Cut(mantissa, "E")
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if strings.Trim(whole+frac, "0123456789") != "" || whole == "" {
		return 0, fmt.Errorf("must be a number of US dollars, not %.20s", s)
	}
	if digits == "" {
		return 0, nil // zero, however written
	}
	if neg {
		return 0, fmt.Errorf("%.30s is negative: a budget is 0 or more", s)
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(exponent)
		switch {
		case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(exponent, "-"):
			return 0, notExact
		case errors.Is(err, strconv.ErrRange):
			return 0, tooBig
		case err != nil:
			return 0, fmt.Errorf("must be a number of US dollars, not %.20s", s)
		case e < -1<<40:
			return 0, notExact
		case e > 1<<40:
			return 0, tooBig
		}
		exp = e
	}
	// The amount is digits × 10^(exp − len(frac)) dollars, so digits ×
	// 10^shift micro-USD.
	shift := exp - len(frac) + 6
	trimmed := strings.TrimRight(digits, "0")
	shift += len(digits) - len(trimmed)
	switch {
	case shift < 0:
		return 0, notExact
	case len(trimmed)+shift > len(strconv.FormatInt(int64(MaxMicros), 10)):
		return 0, tooBig
	}
	n, err := strconv.ParseInt(trimmed+strings.Repeat("0", shift), 10, 64)
	if err != nil || Dollars(n) > MaxMicros {
		return 0, tooBig
	}
	return Dollars(n), nil
}
