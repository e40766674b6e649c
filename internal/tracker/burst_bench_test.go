package tracker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// lostRaces counts the batches that lost their race.
type lostRaces struct {
	store.Store
	n atomic.Int64
}

func (l *lostRaces) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	res, err := l.Store.Exec(ctx, batch...)
	if errors.Is(err, store.ErrLostRace) {
		l.n.Add(1)
	}
	return res, err
}

// BenchmarkCreationBurst: n concurrent creations in one project, all
// taking numbers from its key counter, through an applier with the default
// bounds. One op is one burst (in a new project); any creation that fails
// fails the benchmark. lost/creation is how many lost races a creation
// cost on average.
func BenchmarkCreationBurst(b *testing.B) {
	for _, engine := range storetest.Engines {
		b.Run(engine, func(b *testing.B) {
			st := &lostRaces{Store: storetest.Open(b, engine)}
			c := clock.Real{}
			a := &transition.Applier{Store: st, Clock: c}
			ten := tenancy.New(st, a, c, tenancy.Hooks{})
			svc := New(st, a, c, ten, Hooks{})
			ctx := context.Background()
			o, err := ten.CreateOrganization(ctx, itemAlice, tenancy.OrganizationInput{Slug: "acme", Name: "Acme"})
			if err != nil {
				b.Fatal(err)
			}
			projects := 0
			for _, n := range []int{100, 200, 500, 1000} {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
					lost := st.n.Load()
					for b.Loop() {
						projects++
						p, err := ten.CreateProject(ctx, itemAlice, o.ID, tenancy.ProjectInput{Key: fmt.Sprintf("B%d", projects), Name: "Burst"})
						if err != nil {
							b.Fatal(err)
						}
						var failed atomic.Int64
						var wg sync.WaitGroup
						for i := range n {
							wg.Add(1)
							go func() {
								defer wg.Done()
								if _, err := svc.CreateItem(ctx, itemAlice, p, ItemInput{Type: "task", Title: fmt.Sprintf("burst %d", i)}); err != nil {
									failed.Add(1)
								}
							}()
						}
						wg.Wait()
						if f := failed.Load(); f > 0 {
							b.Fatalf("%d of %d creations failed", f, n)
						}
					}
					b.ReportMetric(float64(st.n.Load()-lost)/float64(b.N*n), "lost/creation")
				})
			}
		})
	}
}
