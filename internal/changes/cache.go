package changes

import "github.com/ballet/ballet/internal/lru"

// DefaultCacheBytes is the cache's size unless NewCache is told otherwise.
const DefaultCacheBytes = 64 << 20

// Cache keeps compared branches by repository, branch and both heads: what
// two commits compare to never changes. It is bounded by the bytes it
// holds (about), the least recently used going first. Its methods are safe
// for concurrent use; a nil *Cache keeps nothing.
type Cache struct {
	lru *lru.Cache[cacheKey, compared]
}

type cacheKey struct {
	kind, url, branch, base, head string
}

// NewCache returns a cache of at most maxBytes (DefaultCacheBytes when 0
// or less).
func NewCache(maxBytes int) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{lru: lru.New[cacheKey](maxBytes, func(c compared) int { return c.size })}
}

// Len is the number of entries.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	return c.lru.Len()
}

func (c *Cache) get(k cacheKey) (compared, bool) {
	if c == nil {
		return compared{}, false
	}
	return c.lru.Get(k)
}

func (c *Cache) put(k cacheKey, v compared) {
	if c != nil {
		c.lru.Put(k, v)
	}
}
