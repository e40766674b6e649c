package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Result is one measurement.
type Result struct {
	ID     string `json:"id"`     // stable key, e.g. "tx/ballet-sqlite/8"
	System string `json:"system"` // who was measured
	What   string `json:"what"`   // what was measured
	Ops    int    `json:"ops"`    // operations counted (batches, inserts, jobs or samples)
	// Seconds is the timed span; PerSecond is Ops/Seconds.
	Seconds   float64 `json:"seconds,omitempty"`
	PerSecond float64 `json:"per_second,omitempty"`
	// Latency figures, in milliseconds (latency measurements only).
	P50Ms  float64 `json:"p50_ms,omitempty"`
	P90Ms  float64 `json:"p90_ms,omitempty"`
	P99Ms  float64 `json:"p99_ms,omitempty"`
	MeanMs float64 `json:"mean_ms,omitempty"`
	MaxMs  float64 `json:"max_ms,omitempty"`
	Note   string  `json:"note,omitempty"`
	// Load1 is the machine's 1-minute load average when the measurement
	// ended (this is a shared 2-core machine).
	Load1 float64 `json:"loadavg_1m"`
}

// Target is one of the project's goals, checked against the results.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Value    float64 `json:"value"` // the measured ratio or figure
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
	Computed bool    `json:"computed"` // false when a needed figure is missing
}

type report struct {
	Started  time.Time      `json:"started"`
	Seconds  float64        `json:"seconds"`
	Machine  Machine        `json:"machine"`
	Settings map[string]any `json:"settings"`
	Results  []Result       `json:"results"`
	Targets  []Target       `json:"targets"`
	Errors   []string       `json:"errors,omitempty"`
}

func (r *report) add(res Result) {
	res.Load1 = loadAvg()
	if res.Seconds > 0 && res.PerSecond == 0 {
		res.PerSecond = float64(res.Ops) / res.Seconds
	}
	r.Results = append(r.Results, res)
	switch {
	case res.P50Ms > 0:
		progress("   %-52s p50 %.2f ms  p99 %.2f ms  (%d samples, load %.2f)", res.System+" "+res.What, res.P50Ms, res.P99Ms, res.Ops, res.Load1)
	default:
		progress("   %-52s %8.0f/s  (%d in %.2fs, load %.2f)", res.System+" "+res.What, res.PerSecond, res.Ops, res.Seconds, res.Load1)
	}
}

func (r *report) get(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// ratio returns a.PerSecond / b.PerSecond.
func (r *report) ratio(a, b string) (float64, bool) {
	x, ok1 := r.get(a)
	y, ok2 := r.get(b)
	if !ok1 || !ok2 || y.PerSecond == 0 {
		return 0, false
	}
	return x.PerSecond / y.PerSecond, true
}

// Research figures for Ballet on rqlite (transitions per second), measured
// earlier on these machines; printed for comparison.
var rqliteResearch = map[string]float64{
	"tx/ballet-rqlite1/1": 500, "tx/ballet-rqlite1/8": 990,
	"tx/ballet-rqlite3/1": 200, "tx/ballet-rqlite3/8": 310,
}

func (r *report) evaluate() {
	w := r.writers()
	ratioTarget := func(name, a, b string, goal float64) {
		t := Target{Name: name, Goal: fmt.Sprintf("≥ %g×", goal), Unit: "×"}
		if v, ok := r.ratio(a, b); ok {
			t.Value, t.Computed, t.Met = v, true, v >= goal
		}
		r.Targets = append(r.Targets, t)
	}
	ratioTarget("transitions ÷ River inserts, sequential", "tx/ballet-sqlite/1", "tx/river-sqlite/1", 2)
	ratioTarget(fmt.Sprintf("transitions ÷ River inserts, %d concurrent", w), fmt.Sprintf("tx/ballet-sqlite/%d", w), fmt.Sprintf("tx/river-sqlite/%d", w), 2)
	ratioTarget("job throughput ÷ River at 1 ms FetchCooldown", "jobs/ballet-sqlite", "jobs/river-1ms", 3)
	t := Target{Name: "enqueue-to-start p50", Goal: "≤ 5 ms", Unit: "ms"}
	if res, ok := r.get("lat/ballet-sqlite"); ok {
		t.Value, t.Computed, t.Met = res.P50Ms, true, res.P50Ms <= 5
	}
	r.Targets = append(r.Targets, t)
}

func (r *report) writers() int {
	if w, ok := r.Settings["writers"].(int); ok {
		return w
	}
	return 8
}

func verdict(t Target) string {
	if !t.Computed {
		return "not measured"
	}
	s := "MET"
	if !t.Met {
		s = "MISSED"
	}
	if t.Unit == "×" {
		return fmt.Sprintf("%.2f×  (target %s)  %s", t.Value, t.Goal, s)
	}
	return fmt.Sprintf("%.2f %s  (target %s)  %s", t.Value, t.Unit, t.Goal, s)
}

func rate(r *report, id string) string {
	res, ok := r.get(id)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%s/s", thousands(res.PerSecond))
}

func thousands(v float64) string {
	n := int64(math.Round(v))
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *report) print(out io.Writer) {
	w := r.writers()
	m := r.Machine
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("")
	p("Ballet benchmark — %s — %d CPUs (%s), %s %s/%s, load average %.2f at start, %.2f at end, %.0f s total",
		r.Started.Format("2006-01-02 15:04 MST"), m.CPUs, m.CPUModel, m.Go, m.GOOS, m.GOARCH, m.LoadAvg1, m.LoadAvgEnd, r.Seconds)
	p("SQLite (modernc v1.62.0): WAL, synchronous=NORMAL, busy_timeout, foreign_keys, BEGIN IMMEDIATE; fresh file per measurement. River v0.51.2 (riversqlite), pool of %v connection(s).", r.Settings["river_pool_size"])
	p("")
	p("1. Write commits per second                                     %14s %14s%s", "sequential", fmt.Sprintf("%d concurrent", w), r.loads("tx/ballet-sqlite", "tx/river"))
	p("   Ballet SQLite  transition.Applier.Apply (update+guard+event+job) %11s %14s", rate(r, "tx/ballet-sqlite/1"), rate(r, fmt.Sprintf("tx/ballet-sqlite/%d", w)))
	p("   River SQLite   client.Insert of one job                          %11s %14s", rate(r, "tx/river-sqlite/1"), rate(r, fmt.Sprintf("tx/river-sqlite/%d", w)))
	for _, t := range r.Targets[:2] {
		p("   Ballet ÷ River, %-45s %s", strings.TrimPrefix(t.Name, "transitions ÷ River inserts, ")+":", verdict(t))
	}
	p("")
	p("2. No-op jobs completed per second, %d slots                       %7s %9s %12s%s", r.slots(), "jobs", "seconds", "jobs/s", r.loads("jobs/ballet-sqlite", "jobs/river"))
	for _, row := range []struct{ id, label string }{
		{"jobs/ballet-sqlite", "Ballet SQLite  orchestrator (Poll 1 s)"},
		{"jobs/river-default", "River SQLite   FetchCooldown 100 ms (default)"},
		{"jobs/river-1ms", "River SQLite   FetchCooldown 1 ms"},
	} {
		if res, ok := r.get(row.id); ok {
			p("   %-62s %7d %9.2f %12s", row.label, res.Ops, res.Seconds, thousands(res.PerSecond))
		} else {
			p("   %-62s %7s %9s %12s", row.label, "-", "-", "-")
		}
	}
	p("   Ballet ÷ River at 1 ms cooldown:                               %s", verdict(r.Targets[2]))
	p("")
	p("3. Enqueue-to-start latency, idle queue (ms)       %8s %8s %8s %8s %8s %8s%s", "samples", "p50", "p90", "p99", "mean", "max", r.loads("lat/"))
	for _, row := range []struct{ id, label string }{
		{"lat/ballet-sqlite", "Ballet SQLite  Apply → OnCommit Notify"},
		{"lat/river-default", "River SQLite   Insert, cooldown 100 ms"},
		{"lat/river-1ms", "River SQLite   Insert, cooldown 1 ms"},
	} {
		if res, ok := r.get(row.id); ok {
			p("   %-47s %8d %8.2f %8.2f %8.2f %8.2f %8.2f", row.label, res.Ops, res.P50Ms, res.P90Ms, res.P99Ms, res.MeanMs, res.MaxMs)
		} else {
			p("   %-47s %8s", row.label, "-")
		}
	}
	p("   Ballet p50:                                                     %s", verdict(r.Targets[3]))
	p("")
	p("4. Ballet on rqlite v8.43.4 (local cluster)        %14s %14s   %s%s", "sequential", fmt.Sprintf("%d concurrent", w), "research (seq / 8 conc.)", r.loads("tx/ballet-rqlite", "jobs/ballet-rqlite"))
	for _, n := range []int{1, 3} {
		a, b := fmt.Sprintf("tx/ballet-rqlite%d/1", n), fmt.Sprintf("tx/ballet-rqlite%d/%d", n, w)
		p("   %-47s %14s %14s   %s", fmt.Sprintf("%d node%s: transition batches", n, plural(n)), rate(r, a), rate(r, b),
			fmt.Sprintf("%.0f / %.0f", rqliteResearch[fmt.Sprintf("tx/ballet-rqlite%d/1", n)], rqliteResearch[fmt.Sprintf("tx/ballet-rqlite%d/8", n)]))
	}
	if res, ok := r.get("jobs/ballet-rqlite3"); ok {
		p("   %-47s %14s   (%d jobs in %.2f s)", fmt.Sprintf("3 nodes: no-op jobs, %d slots", r.slots()), rate(r, "jobs/ballet-rqlite3"), res.Ops, res.Seconds)
	} else {
		p("   %-47s %14s", fmt.Sprintf("3 nodes: no-op jobs, %d slots", r.slots()), "-")
	}
	notes := []string{}
	for _, res := range r.Results {
		if res.Note != "" {
			notes = append(notes, fmt.Sprintf("   %s %s: %s", res.System, res.What, res.Note))
		}
	}
	sort.Strings(notes)
	if len(notes) > 0 {
		p("")
		p("Notes:")
		for _, n := range notes {
			p("%s", n)
		}
	}
	if len(r.Errors) > 0 {
		p("")
		p("ERRORS:")
		for _, e := range r.Errors {
			p("   %s", e)
		}
	}
}

// loads returns the range of load averages seen at the end of the
// measurements whose id starts with one of the prefixes.
func (r *report) loads(prefixes ...string) string {
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, res := range r.Results {
		for _, p := range prefixes {
			if strings.HasPrefix(res.ID, p) {
				lo, hi, n = math.Min(lo, res.Load1), math.Max(hi, res.Load1), n+1
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("   [load %.1f–%.1f]", lo, hi)
}

func (r *report) slots() int {
	if s, ok := r.Settings["slots"].(int); ok {
		return s
	}
	return 8
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// latencyResult summarises samples.
func latencyResult(id, system, what string, samples []time.Duration) Result {
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) float64 {
		if len(s) == 0 {
			return 0
		}
		i := int(math.Ceil(p*float64(len(s)))) - 1
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	res := Result{ID: id, System: system, What: what, Ops: len(s)}
	if len(s) > 0 {
		res.P50Ms, res.P90Ms, res.P99Ms = pct(0.50), pct(0.90), pct(0.99)
		res.MeanMs = ms(sum / time.Duration(len(s)))
		res.MaxMs = ms(s[len(s)-1])
	}
	return res
}
