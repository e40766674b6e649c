package flow_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// readCounter is a store that records the queries read through it.
type readCounter struct {
	store.Store
	mu      sync.Mutex
	queries []string
	marked  []string // the queries made with a context from marked
}

// markKey marks a context whose reads readCounter also keeps apart: a
// call's own reads, not those of Core's loops running meanwhile.
type markKey struct{}

func marked(ctx context.Context) context.Context { return context.WithValue(ctx, markKey{}, true) }

func (c *readCounter) Query(ctx context.Context, q string, args ...any) (*store.Rows, error) {
	c.mu.Lock()
	c.queries = append(c.queries, q)
	if ctx.Value(markKey{}) != nil {
		c.marked = append(c.marked, q)
	}
	c.mu.Unlock()
	return c.Store.Query(ctx, q, args...)
}

// takeMarked returns the queries made with a marked context since the
// last takeMarked.
func (c *readCounter) takeMarked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.marked
	c.marked = nil
	return q
}

// take returns the queries read since the last take.
func (c *readCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries
	c.queries = nil
	return q
}

// An approval reads the ticket once (the door resolves it to authorize and
// the flow decides with it) and the flow's own row once; only the answer,
// the flow's view, derives its attention.
func TestApprovalReadsTheItemOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		rc := &readCounter{Store: s}
		w := newWorld(t, rc, map[string]map[string]any{"bug": mergePipeline})
		key := w.ticket("bug")
		w.mustStep(flow.JobEnter, key)
		rc.take()
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/approve", nil)
		items, attended := reads(rc.take())
		if items != 1 {
			t.Errorf("the approval read the ticket %d times; want once", items)
		}
		if attended != 1 {
			t.Errorf("the approval derived attention in %d reads; want once, for its answer", attended)
		}
		// The step that enters the next stage reads its flow's own row.
		f := w.flow(key)
		var enter []pendingJob
		for _, j := range w.pending(&f) {
			if j.Kind == flow.JobEnter {
				enter = append(enter, j)
			}
		}
		if len(enter) != 1 {
			t.Fatalf("%d pending %s jobs after the approval, want 1", len(enter), flow.JobEnter)
		}
		rc.take()
		if err := w.runJob(enter[0]); err != nil {
			t.Fatal(err)
		}
		if _, attended := reads(rc.take()); attended != 0 {
			t.Errorf("the merge stage's entry derived attention in %d reads; a step reads only the row it changes", attended)
		}
	})
}

// reads counts the reads of a ticket and the reads of flows that derive
// attention (they join the runners) among queries.
func reads(queries []string) (items, attended int) {
	for _, q := range queries {
		if strings.Contains(q, "FROM items i") {
			items++
		}
		if strings.Contains(q, "FROM flows") && strings.Contains(q, "runners rn") {
			attended++
		}
	}
	return items, attended
}
