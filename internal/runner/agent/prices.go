package agent

import (
	"strings"

	"github.com/ballet/ballet/internal/runproto"
)

// Prices are dollars per million tokens.
type Prices struct {
	Input, Output, CacheRead, CacheWrite float64
}

func (p Prices) set() bool { return p != Prices{} }

// Cost is what usage u costs at p, in dollars.
func (p Prices) Cost(u runproto.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}

// listPrices are Anthropic's list prices of the Claude families, dollars
// per million tokens, the ones claude-code prices its sessions with. They
// price the usage the CLI did not (a session stopped before its result
// line). A model is priced by its family's name in it ("claude-sonnet-4-5",
// "anthropic/claude-haiku-4-5-20251001"); the first match wins, so the
// older, dearer versions of a family come before the family's default.
var listPrices = []struct {
	name   string
	prices Prices
}{
	{"opus-4-1", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
	{"opus-4-0", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
	{"opus-4-2025", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}}, // claude-opus-4-20250514
	{"opus-4@", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},     // Vertex's claude-opus-4@20250514
	{"3-opus", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
	{"opus", Prices{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}},
	{"sonnet", Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
	{"3-5-haiku", Prices{Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1}},
	{"3-haiku", Prices{Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.3}},
	{"haiku", Prices{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
}

// dearest prices a model of no known family: a budget then over-counts
// rather than lets an unpriced session go free.
var dearest = Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}

// ListPrices returns the list prices of model, and whether its family is
// known; unknown, they are the dearest of the table.
func ListPrices(model string) (Prices, bool) {
	m := strings.ToLower(model)
	for _, p := range listPrices {
		if strings.Contains(m, p.name) {
			return p.prices, true
		}
	}
	return dearest, false
}
