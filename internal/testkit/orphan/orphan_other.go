//go:build !linux

package orphan

import "testing"

// DiesWithItsTest needs /proc to see the server's state: Linux only.
func DiesWithItsTest(t *testing.T, what string, env ...string) {
	t.Skipf("checking that %s dies with its test needs Linux's /proc", what)
}
