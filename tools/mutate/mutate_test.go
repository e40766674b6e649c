package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMutants(t *testing.T) {
	src := `package p

func f(a, b int, ok bool, s string) (int, bool) {
	if a == b && !ok || a < b {
		a++
		a += b * 2
		s = "x" + s
		g()
		log.Info("not a mutant")
		mu.Lock()
	}
	if ok {
		return a - b, true
	}
	_ = s
	x := append(xs, a, b)
	y := []int{a, b}
	return a % b, false
}
`
	ms, err := Mutants("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d %s %s→%s", m.Line, m.Class, m.From, m.To))
		want := src[:m.start] + m.To + src[m.end:]
		if applied := string(m.Apply([]byte(src))); applied != want || src[m.start:m.end] != m.From {
			t.Errorf("%s: applied as\n%s", m, applied)
		}
	}
	want := []string{
		"4 cond-negate ==→!=", "4 logical ||→&&", "4 logical &&→||", "4 not !ok→ok",
		"4 cond-boundary <→<=", "4 cond-negate <→>=",
		"5 incdec ++→--", "6 incdec +=→-=", "6 arith *→/",
		"7 assign-remove s = \"x\" + s→", "8 call-remove g()→",
		"12 if-negate ok→!(ok)", "13 arith -→+", "13 bool-return true→false",
		"16 elem-drop a, →", "16 elem-drop , b→", "17 elem-drop a, →", "17 elem-drop , b→",
		"18 arith %→*", "18 bool-return false→true",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("mutants:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestSQLMutants(t *testing.T) {
	for _, c := range []struct {
		lit  string
		want []string // class: mutated literal
	}{
		{"`UPDATE jobs SET status = 'done', attempt = attempt + 1, at = ? WHERE id = ? AND attempt <= ?`", []string{
			"sql-cond: `UPDATE jobs SET status = 'done', attempt = attempt + 1, at = ? WHERE (id = ? OR 1) AND attempt <= ?`",
			"sql-cond: `UPDATE jobs SET status = 'done', attempt = attempt + 1, at = ? WHERE id = ? AND (attempt <= ? OR 1)`",
			"sql-boundary: `UPDATE jobs SET status = 'done', attempt = attempt + 1, at = ? WHERE id = ? AND attempt < ?`",
			"sql-incr: `UPDATE jobs SET status = 'done', attempt = attempt, at = ? WHERE id = ? AND attempt <= ?`",
		}},
		{`"INSERT INTO race_guard (lost) SELECT 1 WHERE changes() = 0"`, []string{
			`sql-cond: "INSERT INTO race_guard (lost) SELECT 1 WHERE (changes() = 0 OR 1)"`,
		}},
		{`" AND p IN ('', ?) OR q IS NOT NULL"`, []string{
			`sql-cond: " AND (p IN ('', ?) OR 1) OR q IS NOT NULL"`,
			`sql-cond: " AND p IN ('', ?) OR (q IS NOT NULL OR 1)"`,
		}},
		{"`flows.status = 'running' AND EXISTS (SELECT 1 FROM runs r WHERE r.id = flows.run_id)`", []string{
			"sql-cond: `(flows.status = 'running' OR 1) AND EXISTS (SELECT 1 FROM runs r WHERE r.id = flows.run_id)`",
			"sql-cond: `flows.status = 'running' AND EXISTS (SELECT 1 FROM runs r WHERE (r.id = flows.run_id OR 1))`",
		}},
		{`"a = b is not SQL"`, nil},
	} {
		var got []string
		for _, m := range sqlMutants(c.lit) {
			got = append(got, m.class+": "+c.lit[:m.start]+m.to+c.lit[m.end:])
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s:\n  %s\nwant:\n  %s", c.lit, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
}

// TestRun mutates testdata/sample for real: the equivalent boundary mutant
// of Max lives, the other is killed; Sum's are killed but one, which loops
// forever and times out; Untested's is not covered; Flatten's are killed,
// two of them after a repair (they leave a variable unused).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary per mutant")
	}
	var out, progress strings.Builder
	report := t.TempDir() + "/report.txt"
	// -min: the looping mutant's tests end after 10 s; the others take
	// milliseconds.
	err := run([]string{"-min", "10s", "-out", report, "./testdata/sample"}, &out, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	for _, want := range []string{
		"./testdata/sample                 10       7       1       1       1       0    80.0%    88.9%",
		"lived (1):\n  testdata/sample/sample.go:6:7 cond-boundary: `>` → `>=`",
		"not covered (1):\n  testdata/sample/sample.go:22:38 cond-negate: `==` → `!=`",
		"timed out (1):\n  testdata/sample/sample.go:15:23 incdec: `++` → `--`",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if b, err := os.ReadFile(report); err != nil || string(b) != out.String() {
		t.Errorf("-out file: %v\n%s", err, b)
	}
}

func TestRepair(t *testing.T) {
	src := `package x

import (
	"fmt"
	str "strings"
)

func f(xs []int) {
	for _, g := range xs {
	}
	if v := 1; true {
	}
	y := 2
	var z = 3
}
`
	output := `# x
./x.go:4:2: "fmt" imported and not used
./x.go:5:2: "strings" imported and not used
./x.go:9:9: declared and not used: g
./x.go:11:5: declared and not used: v
./x.go:13:2: declared and not used: y
./x.go:14:6: declared and not used: z
`
	want := `package x

import (
	_ "fmt"
	_ "strings"
)

func f(xs []int) {
	for _, g := range xs { _ = g;
	}
	if v := 1; true { _ = v;
	}
	y := 2; _ = y
	var z = 3; _ = z
}
`
	got, ok := repair("/src/x.go", []byte(src), output)
	if !ok || string(got) != want {
		t.Errorf("repair: %v\n%s", ok, got)
	}
	// Any other error: no repair.
	if _, ok := repair("/src/x.go", []byte(src), output+"./x.go:3:1: undefined: h\n"); ok {
		t.Error("repaired a file with another error")
	}
}
