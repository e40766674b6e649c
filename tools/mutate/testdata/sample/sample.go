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
