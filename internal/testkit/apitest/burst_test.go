package apitest_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// burst sends n concurrent POST /projects/ACME/items (no version: a
// creation) and returns the items created and the other answers by
// status.
func burst(e *apitest.Env, n int) ([]apiItem, map[int]int) {
	var mu sync.Mutex
	var items []apiItem
	others := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := e.Do(apitest.BootstrapToken, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": fmt.Sprintf("burst %d", i)})
			mu.Lock()
			defer mu.Unlock()
			if r.Status != 201 {
				others[r.Status]++
				return
			}
			var it apiItem
			r.JSON(e.T, &it)
			items = append(items, it)
		}()
	}
	close(start)
	wg.Wait()
	return items, others
}

// TestCreationBurstNeverConflicts: a burst of concurrent creations (no
// version sent, so nothing can be stale) all succeed, numbered 1..n, on both
// engines. They collide on the project's key counter; the applier retries
// lost races in a fair queue, bounded by time, so none gives up with 409.
func TestCreationBurstNeverConflicts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		const n = 150
		items, others := burst(e, n)
		if len(others) > 0 {
			t.Fatalf("%d of %d creations failed: %v (status → count)", n-len(items), n, others)
		}
		nums := make([]int64, len(items))
		for i, it := range items {
			nums[i] = it.Number
			if it.Key != fmt.Sprintf("ACME-%d", it.Number) {
				t.Errorf("item %s has number %d", it.Key, it.Number)
			}
		}
		sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
		for i, v := range nums {
			if v != int64(i+1) {
				t.Fatalf("numbers %v, want 1..%d each once", nums, n)
			}
		}
	})
}
