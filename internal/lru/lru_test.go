package lru_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/lru"
)

func size(s string) int { return len(s) }

// keys returns the keys of those given that c keeps (reading them, which
// makes them recently used in that order).
func keys(c *lru.Cache[string, string], of ...string) []string {
	var out []string
	for _, k := range of {
		if _, ok := c.Get(k); ok {
			out = append(out, k)
		}
	}
	return out
}

// TestEvictsTheLeastRecentlyUsed: past its bytes, the cache evicts the
// value least recently read or put, as many as it takes, and no more.
func TestEvictsTheLeastRecentlyUsed(t *testing.T) {
	c := lru.New[string, string](30, size)
	for _, k := range []string{"a", "b", "c"} {
		c.Put(k, strings.Repeat(k, 10))
	}
	if c.Len() != 3 || c.Bytes() != 30 {
		t.Fatalf("3 values of 10 bytes: len %d, %d bytes", c.Len(), c.Bytes())
	}
	if v, ok := c.Get("a"); !ok || v != "aaaaaaaaaa" { // a is now the most recently used, b the least
		t.Fatalf("a: %q, %v", v, ok)
	}
	c.Put("d", strings.Repeat("d", 10))
	if got := keys(c, "a", "b", "c", "d"); fmt.Sprint(got) != "[a c d]" {
		t.Fatalf("after d: %v, want b evicted", got)
	}
	// Read in the order a, c, d: a is the least recently used now. A value
	// of 20 bytes evicts a and c, not d.
	c.Put("e", strings.Repeat("e", 20))
	if got := keys(c, "a", "c", "d", "e"); fmt.Sprint(got) != "[d e]" || c.Bytes() != 30 {
		t.Fatalf("after e: %v, %d bytes; want [d e], 30", got, c.Bytes())
	}
}

// TestPutReplaces: a key put again holds its new value, measured anew,
// and becomes the most recently used.
func TestPutReplaces(t *testing.T) {
	c := lru.New[string, string](10, size)
	c.Put("a", "12345")
	c.Put("b", "123")
	c.Put("a", "12") // a: 2 bytes now, and the most recently used
	if c.Len() != 2 || c.Bytes() != 5 {
		t.Fatalf("len %d, %d bytes; want 2, 5", c.Len(), c.Bytes())
	}
	c.Put("c", "1234567") // 12 bytes: b, the least recently used, goes
	if got := keys(c, "a", "b", "c"); fmt.Sprint(got) != "[a c]" {
		t.Fatalf("%v, want [a c]", got)
	}
	if v, _ := c.Get("a"); v != "12" {
		t.Fatalf("a holds %q", v)
	}
}

// TestTooLargeIsNotKept: a value larger than the whole cache is not kept
// and evicts nothing else; the value its key held before is gone.
func TestTooLargeIsNotKept(t *testing.T) {
	c := lru.New[string, string](10, size)
	c.Put("a", "1234")
	c.Put("b", "1234")
	c.Put("a", strings.Repeat("x", 11))
	if got := keys(c, "a", "b"); fmt.Sprint(got) != "[b]" || c.Bytes() != 4 {
		t.Fatalf("%v, %d bytes; want [b], 4", got, c.Bytes())
	}
}

// TestNilKeepsNothing: a nil cache is a cache that keeps nothing.
func TestNilKeepsNothing(t *testing.T) {
	var c *lru.Cache[string, int]
	c.Put("a", 1)
	if _, ok := c.Get("a"); ok || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatal("a nil cache kept a value")
	}
}

// TestConcurrentUseStaysBounded: many goroutines putting and reading at
// once (run with -race) leave the cache within its bytes, its count and
// its bytes agreeing.
func TestConcurrentUseStaysBounded(t *testing.T) {
	c := lru.New[int, []byte](1000, func(b []byte) int { return len(b) })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := (g*500 + i) % 97
				c.Put(k, make([]byte, 10+k))
				if v, ok := c.Get(k); ok && len(v) != 10+k {
					t.Errorf("key %d holds %d bytes", k, len(v))
				}
			}
		}()
	}
	wg.Wait()
	if c.Bytes() > 1000 || c.Bytes() < 1000-10-96 {
		t.Fatalf("%d bytes held, want at most 1000 and within the largest value of it", c.Bytes())
	}
	sum := 0
	for k := range 97 {
		if v, ok := c.Get(k); ok {
			sum += len(v)
		}
	}
	if sum != c.Bytes() {
		t.Fatalf("the values kept hold %d bytes, the cache counts %d", sum, c.Bytes())
	}
}
