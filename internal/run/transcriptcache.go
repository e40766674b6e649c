package run

import (
	"container/list"
	"sync"
)

// transcriptCacheBytes bounds the transcripts kept (about: the bytes of
// their texts and a little per entry).
const transcriptCacheBytes = 32 << 20

// transcriptCache keeps the transcripts of finished runs by run id: a
// finished run's log takes no more chunks (AppendLog refuses them), so its
// transcript never changes and is parsed once. It is bounded by the bytes
// it holds, the least recently read going first; safe for concurrent use.
type transcriptCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *cachedTranscript, most recently used first
	byRun map[string]*list.Element
}

type cachedTranscript struct {
	run  string
	page TranscriptPage
	size int
}

func newTranscriptCache(maxBytes int) *transcriptCache {
	return &transcriptCache{max: maxBytes, order: list.New(), byRun: map[string]*list.Element{}}
}

func (c *transcriptCache) get(runID string) (TranscriptPage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byRun[runID]
	if !ok {
		return TranscriptPage{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedTranscript).page, true
}

func (c *transcriptCache) put(runID string, p TranscriptPage) {
	size := transcriptSize(p)
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byRun[runID]; ok {
		c.size -= e.Value.(*cachedTranscript).size
		c.order.Remove(e)
	}
	c.byRun[runID] = c.order.PushFront(&cachedTranscript{run: runID, page: p, size: size})
	c.size += size
	for c.size > c.max {
		last := c.order.Back()
		old := last.Value.(*cachedTranscript)
		c.order.Remove(last)
		delete(c.byRun, old.run)
		c.size -= old.size
	}
}

// transcriptSize is about the bytes p holds.
func transcriptSize(p TranscriptPage) int {
	n := 64
	for _, e := range p.Entries {
		n += 128 + len(e.Text) + len(e.Tool) + len(e.ID) + len(e.Input) + len(e.Outcome) + len(e.Model)
	}
	return n
}
