// Package bounds is the one table of the numbers a client may write to
// Ballet — usage and costs, budgets, limits, timeouts, sizes, counts,
// versions and the cursors and page sizes of queries — each with its
// documented range, in Core's API, the runner protocol, MCP and the
// Knowledge service alike. Whoever takes such a number checks it against
// its Bound here and answers a 400 naming the field beyond it; docs/api.md
// holds the table (Markdown renders it, a test keeps the two equal), and a
// test walks every request body so that no number goes without an entry.
// It is pure: domain packages and both services use it.
package bounds

import (
	"fmt"
	"math"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/runproto"
)

// MaxSafe is the largest integer every JSON client reads exactly (2^53 −
// 1): versions, cursors and offsets stay within it.
const MaxSafe = 1<<53 - 1

// A Bound is the range of one kind of number a client writes, and where
// it writes it.
type Bound struct {
	Name   string
	Min    int64
	Max    int64
	Unit   string   // what it counts: tokens, US dollars, seconds …
	Fields []string // where: "POST /api/v1/runs/{run}/finish usage.input_tokens", "GET /api/v1/…?limit"
}

// Numbers a client writes. Each entry's Fields name every place it is
// written; the table is Table.
var (
	Tokens = Bound{Name: "token count", Min: 0, Max: 1_000_000_000_000, Unit: "tokens (per run)", Fields: []string{
		"POST /api/v1/runs/{run}/finish usage.input_tokens", "POST /api/v1/runs/{run}/finish usage.output_tokens",
		"POST /api/v1/runs/{run}/finish usage.cache_read_tokens", "POST /api/v1/runs/{run}/finish usage.cache_write_tokens",
		"POST /api/v1/runs/{run}/usage input_tokens", "POST /api/v1/runs/{run}/usage output_tokens",
		"POST /api/v1/runs/{run}/usage cache_read_tokens", "POST /api/v1/runs/{run}/usage cache_write_tokens"}}
	CostUSD = Bound{Name: "run cost", Min: 0, Max: 1_000_000, Unit: "US dollars (per run)", Fields: []string{
		"POST /api/v1/runs/{run}/finish usage.cost_usd", "POST /api/v1/runs/{run}/usage cost_usd"}}
	BudgetUSD = Bound{Name: "budget", Min: 0, Max: 1_000_000, Unit: "US dollars, in millionths at most", Fields: []string{
		"POST /api/v1/orgs/{org}/projects budgets.per_ticket_usd", "POST /api/v1/orgs/{org}/projects budgets.per_day_usd",
		"PATCH /api/v1/projects/{project} budgets.per_ticket_usd", "PATCH /api/v1/projects/{project} budgets.per_day_usd"}}
	ExitStatus = Bound{Name: "exit status", Min: math.MinInt32, Max: math.MaxInt32, Unit: "a process's exit status", Fields: []string{
		"POST /api/v1/runs/{run}/finish exit_status"}}
	LeaseWait = Bound{Name: "lease wait", Min: 0, Max: runproto.MaxLeaseWait, Unit: "seconds", Fields: []string{
		"POST /api/v1/runners/{runner}/lease wait_seconds"}}
	Capacity = Bound{Name: "runner capacity", Min: 1, Max: runproto.MaxCapacity, Unit: "sessions at once", Fields: []string{
		"POST /api/v1/runners capacity"}}
	ProjectConcurrency = Bound{Name: "project concurrency", Min: 0, Max: 1000, Unit: "tickets running at once (0: no limit)", Fields: []string{
		"POST /api/v1/orgs/{org}/projects concurrency_limit", "PATCH /api/v1/projects/{project} concurrency_limit"}}
	PlatformConcurrency = Bound{Name: "platform concurrency", Min: 0, Max: 10_000, Unit: "tickets running at once (0: no limit)", Fields: []string{
		"PATCH /api/v1/platform concurrency_limit"}}
	RequiredApprovals = Bound{Name: "required approvals", Min: 0, Max: 10, Unit: "approvals", Fields: []string{
		"POST /api/v1/orgs/{org}/projects merge_policy.required_approvals", "PATCH /api/v1/projects/{project} merge_policy.required_approvals"}}
	StageTimeout = Bound{Name: "stage timeout", Min: 1, Max: 7 * 24 * 60, Unit: "minutes", Fields: []string{
		"a pipeline definition's stages[].timeout_minutes"}}
	MaxIterations = Bound{Name: "stage iterations", Min: 1, Max: 20, Unit: "iterations", Fields: []string{
		"a pipeline definition's stages[].max_iterations"}}
	Version = Bound{Name: "version", Min: 1, Max: MaxSafe, Unit: "a version read (optimistic writes), or the version to read", Fields: []string{
		"PATCH /api/v1/items/{item} version", "PATCH /api/v1/projects/{project} version", "PATCH /api/v1/platform version",
		"PUT /api/v1/projects/{project}/skills/{name} version", "GET /api/v1/projects/{project}/skills/{name}?version",
		"PUT /api/v1/projects/{project}/pipelines/{name} version (0: the built-in default)", "GET /api/v1/projects/{project}/pipelines/{name}?version (0: the built-in default)",
		"Knowledge PUT …/entries/{slug} version", "Knowledge POST …/entries/{slug}/restore version, based_on",
		"Knowledge GET …/entries/{slug}?version, …/diff?from, ?to", "MCP read_entry version"}}
	After = Bound{Name: "cursor", Min: 0, Max: MaxSafe, Unit: "an event seq (answers after it)", Fields: []string{
		"GET …/events?after (items, projects, organizations, tokens, runners …)", "GET /api/v1/projects/{project}/items?after",
		"realtime subscribe after_seq", "GET /api/v1/me/notifications/inbox?before (answers before it)"}}
	LogOffset = Bound{Name: "log offset", Min: 0, Max: 999_999_999_999_999_999, Unit: "bytes (at most 18 digits)", Fields: []string{
		"POST /api/v1/runs/{run}/log?offset", "GET /api/v1/runs/{run}/log?offset"}}
	Limit = Bound{Name: "page size", Min: 1, Max: 1000, Unit: "entries (each route its own default and maximum, at most this)", Fields: []string{
		"GET /api/v1/projects/{project}/items?limit (200 at most)", "GET …/events?limit", "GET /api/v1/tokens?limit",
		"GET /api/v1/projects/{project}/flows?limit", "GET /api/v1/needs-me?limit", "GET /api/v1/me/notifications/inbox?limit (200 at most)", "Knowledge GET …/entries?limit", "Knowledge GET /search?limit",
		"GET …/webhooks/{id}/deliveries?limit (200 at most)"}}
	TokenLifetime = Bound{Name: "token lifetime", Min: 1, Max: 365 * 24 * 3600, Unit: "seconds (a Go duration: expires_in, at most 8760h)", Fields: []string{
		"POST /api/v1/tokens expires_in"}}
)

// Table is every Bound, in the order docs/api.md lists them.
var Table = []*Bound{&Tokens, &CostUSD, &BudgetUSD, &ExitStatus, &LeaseWait, &Capacity, &ProjectConcurrency, &PlatformConcurrency,
	&RequiredApprovals, &StageTimeout, &MaxIterations, &Version, &After, &LogOffset, &Limit, &TokenLifetime}

// Has reports whether n is within b.
func (b Bound) Has(n int64) bool { return n >= b.Min && n <= b.Max }

// HasFloat reports whether x is a number (not NaN) within b.
func (b Bound) HasFloat(x float64) bool {
	return !math.IsNaN(x) && x >= float64(b.Min) && x <= float64(b.Max)
}

// Range is how an error names b's range: "from 0 to 1000000000000".
func (b Bound) Range() string { return fmt.Sprintf("from %d to %d", b.Min, b.Max) }

// Check adds field's problem to v when n is outside b.
func (b Bound) Check(v *apperr.Validator, field string, n int64) {
	v.Check(b.Has(n), field, "must be a whole number %s (%s), not %d", b.Range(), b.Unit, n)
}

// CheckFloat adds field's problem to v when x is not a number within b.
func (b Bound) CheckFloat(v *apperr.Validator, field string, x float64) {
	v.Check(b.HasFloat(x), field, "must be a number %s (%s), not %g", b.Range(), b.Unit, x)
}

// Err is Check as a 400 of its own (nil within b).
func (b Bound) Err(field string, n int64) error {
	var v apperr.Validator
	b.Check(&v, field, n)
	return v.Err()
}

// CheckVersionRead adds the problem of the version an optimistic write
// sends (the one read): required, and within Version.
func CheckVersionRead(v *apperr.Validator, version int64) {
	if version < 1 {
		v.Add("version", "is required: the version you read")
		return
	}
	Version.Check(v, "version", version)
}

// Markdown is the table as docs/api.md shows it.
func Markdown() string {
	var sb strings.Builder
	sb.WriteString("| number | from | to | unit | written at |\n| --- | --- | --- | --- | --- |\n")
	for _, b := range Table {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", b.Name, group(b.Min), group(b.Max), b.Unit, strings.Join(b.Fields, "; "))
	}
	return sb.String()
}

// group writes n with thousands separators (1,000,000).
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "−" + s
	}
	return s
}
