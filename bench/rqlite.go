package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// launched are the rqlite clusters this program started; killAll kills
// exactly these (on return, a panic, SIGINT or SIGTERM).
var launched struct {
	mu  sync.Mutex
	all map[*rqlitetest.Cluster]bool
}

func killAll() {
	launched.mu.Lock()
	defer launched.mu.Unlock()
	for c := range launched.all {
		c.Stop()
		delete(launched.all, c)
	}
}

// startCluster starts n rqlited nodes under root with the flags the tests
// use (internal/testkit/rqlitetest), and records the cluster for killAll.
func startCluster(bin, root string, n int) (*rqlitetest.Cluster, error) {
	c, err := rqlitetest.Launch(bin, root, n)
	if err != nil {
		return nil, err
	}
	launched.mu.Lock()
	defer launched.mu.Unlock()
	if launched.all == nil {
		launched.all = map[*rqlitetest.Cluster]bool{}
	}
	launched.all[c] = true
	return c, nil
}

// stopCluster kills a cluster started by startCluster.
func stopCluster(c *rqlitetest.Cluster) {
	launched.mu.Lock()
	defer launched.mu.Unlock()
	c.Stop()
	delete(launched.all, c)
}

func rqlitedPath(flagValue string) (string, error) {
	path := flagValue
	if path == "" {
		path = os.Getenv("BALLET_RQLITED")
	}
	if path == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache")
		}
		path = filepath.Join(cache, "ballet", "bin", "rqlited-"+rqlitetest.Version)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return "", fmt.Errorf("rqlited not found at %s: build it with ../scripts/rqlited.sh or pass -rqlited", path)
	}
	return path, nil
}

// withRqlite starts a fresh cluster of n nodes, opens a migrated Ballet
// store on it, runs fn, and kills the cluster.
func (b *bench) withRqlite(ctx context.Context, bin string, n int, name string, fn func(st *rqlite.Store) error) error {
	dir, err := b.tempDir(name)
	if err != nil {
		return err
	}
	c, err := startCluster(bin, dir, n)
	if err != nil {
		return fmt.Errorf("start %d-node rqlite cluster: %w", n, err)
	}
	defer stopCluster(c)
	st, err := rqlite.Open(ctx, rqlite.Options{URLs: c.URLs()})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := prepareBallet(ctx, st); err != nil {
		return err
	}
	return fn(st)
}

func (b *bench) rqliteTransitions(ctx context.Context) error {
	bin, err := rqlitedPath(b.o.rqlited)
	if err != nil {
		return err
	}
	for _, n := range []int{1, 3} {
		for _, writers := range b.writerCounts() {
			err := b.withRqlite(ctx, bin, n, fmt.Sprintf("rqlite%d-tx-%d", n, writers), func(st *rqlite.Store) error {
				ops, el, err := b.balletTransitions(ctx, st, writers, min(b.o.warmup, 20))
				if err != nil {
					return err
				}
				b.rep.add(Result{ID: fmt.Sprintf("tx/ballet-rqlite%d/%d", n, writers), System: fmt.Sprintf("Ballet rqlite %d node%s", n, plural(n)),
					What: fmt.Sprintf("transition batches, %d writer(s)", writers), Ops: ops, Seconds: el.Seconds()})
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) rqliteJobs(ctx context.Context) error {
	bin, err := rqlitedPath(b.o.rqlited)
	if err != nil {
		return err
	}
	return b.withRqlite(ctx, bin, 3, "rqlite3-jobs", func(st *rqlite.Store) error {
		el, err := b.balletJobs(ctx, st, b.o.jobsRqlite, 200)
		if err != nil {
			return err
		}
		b.rep.add(Result{ID: "jobs/ballet-rqlite3", System: "Ballet rqlite 3 nodes", What: fmt.Sprintf("no-op jobs, %d slots", b.o.slots),
			Ops: b.o.jobsRqlite, Seconds: el.Seconds()})
		return nil
	})
}
