// Package sample is a small package for the mutate tool's own test.
package sample

// Max returns the larger of a and b.
func Max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Sum returns 1 + 2 + … + n.
func Sum(n int) int {
	s := 0
	for i := 1; i <= n; i++ {
		s += i
	}
	return s
}

// Untested is run by no test.
func Untested(x int) bool { return x == 1 }

// Flatten lists the numbers of the pairs in order.
func Flatten(ps [][2]int) []int {
	var out []int
	for _, p := range ps {
		a, b := p[0], p[1]
		out = append(out, a, b)
	}
	return out
}
