package changes

import (
	"container/list"
	"sync"
)

// DefaultCacheBytes is the cache's size unless NewCache is told otherwise.
const DefaultCacheBytes = 64 << 20

// Cache keeps compared branches by repository, branch and both heads: what
// two commits compare to never changes. It is bounded by the bytes it
// holds (about), the least recently used going first. Its methods are safe
// for concurrent use; a nil *Cache keeps nothing.
type Cache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *entry, most recently used first
	byKey map[cacheKey]*list.Element
}

type cacheKey struct {
	kind, url, branch, base, head string
}

type entry struct {
	key cacheKey
	val compared
}

// NewCache returns a cache of at most maxBytes (DefaultCacheBytes when 0
// or less).
func NewCache(maxBytes int) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{max: maxBytes, order: list.New(), byKey: map[cacheKey]*list.Element{}}
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache) get(k cacheKey) (compared, bool) {
	if c == nil {
		return compared{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return compared{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry).val, true
}

func (c *Cache) put(k cacheKey, v compared) {
	if c == nil || v.size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.size -= e.Value.(*entry).val.size
		c.order.Remove(e)
	}
	c.byKey[k] = c.order.PushFront(&entry{key: k, val: v})
	c.size += v.size
	for c.size > c.max {
		last := c.order.Back()
		old := last.Value.(*entry)
		c.order.Remove(last)
		delete(c.byKey, old.key)
		c.size -= old.val.size
	}
}
