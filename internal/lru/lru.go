// Package lru is a least-recently-used cache bounded by the bytes its
// values hold, as a size function given with the cache measures them: the
// parsed transcripts of finished runs and the compared branches of the
// changes view keep what never changes under its key in one.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps values by key up to a number of bytes, the least recently
// used (read or put) going first when a put goes past it. Its methods are
// safe for concurrent use; a nil *Cache keeps nothing.
type Cache[K comparable, V any] struct {
	sizeOf func(V) int
	max    int

	mu    sync.Mutex
	size  int
	order *list.List // of *entry[K, V], most recently used first
	byKey map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int
}

// New returns a cache of at most maxBytes, as sizeOf measures each value
// (about: what matters is that the sum bounds the memory held).
func New[K comparable, V any](maxBytes int, sizeOf func(V) int) *Cache[K, V] {
	return &Cache[K, V]{sizeOf: sizeOf, max: maxBytes, order: list.New(), byKey: map[K]*list.Element{}}
}

// Get returns the value kept under k, which becomes the most recently
// used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Put keeps v under k, as the most recently used, in place of what k
// held, and evicts the least recently used until the cache holds at most
// its bytes again. A value larger than the whole cache is not kept (nor is
// what k held before): it evicts nothing else.
func (c *Cache[K, V]) Put(k K, v V) {
	if c == nil {
		return
	}
	size := c.sizeOf(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.remove(e)
	}
	if size > c.max {
		return
	}
	c.byKey[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

func (c *Cache[K, V]) remove(e *list.Element) {
	old := c.order.Remove(e).(*entry[K, V])
	delete(c.byKey, old.key)
	c.size -= old.size
}

// Len returns how many values the cache keeps.
func (c *Cache[K, V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes returns the bytes the kept values hold, as sizeOf measured them.
func (c *Cache[K, V]) Bytes() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
