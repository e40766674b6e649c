package digest

import (
	"errors"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestDecideIsOneGuardedBatch: the digest's row, its event and its job are
// one batch; written against a latest digest that is no longer the latest
// (another digester wrote one meanwhile), or for a period already written,
// the batch is a lost race and writes nothing — no row, no event, no job.
func TestDecideIsOneGuardedBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		a := &transition.Applier{Store: s, Clock: clock.NewFake(now)}
		b1 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
		full := Digest{FromSeq: 0, ToSeq: 0, Since: b1.Add(-24 * time.Hour), Needs: 1}
		tr := decide("ann", b1, Last{}, full, transition.NewID(), now)
		if len(tr.Events) != 1 || len(tr.Guarded) != 1 || len(tr.Jobs) != 1 {
			t.Fatalf("the batch: %d events, %d guarded, %d jobs", len(tr.Events), len(tr.Guarded), len(tr.Jobs))
		}
		if err := a.Apply(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
		count := func() [3]int64 {
			return [3]int64{storetest.Count(t, s, `SELECT COUNT(*) FROM digests`), storetest.Count(t, s, `SELECT COUNT(*) FROM events`),
				storetest.Count(t, s, `SELECT COUNT(*) FROM jobs`)}
		}
		before := count()
		for name, tr := range map[string]*transition.Transition{
			"the same period again":             decide("ann", b1, Last{}, full, transition.NewID(), now),
			"a later period, from a stale read": decide("ann", b1.Add(time.Hour), Last{}, full, transition.NewID(), now),
			"an earlier period":                 decide("ann", b1.Add(-time.Hour), Last{}, full, transition.NewID(), now),
		} {
			if err := a.Apply(t.Context(), tr); !errors.Is(err, store.ErrLostRace) {
				t.Errorf("%s: %v, want a lost race", name, err)
			}
		}
		if after := count(); after != before {
			t.Errorf("a lost race wrote something: %v → %v", before, after)
		}
		// From a fresh read, the next period is written; an empty one has no job.
		last := Last{Found: true, PeriodAt: b1, ToSeq: 0}
		empty := decide("ann", b1.Add(24*time.Hour), last, Digest{Empty: true}, transition.NewID(), now)
		if len(empty.Jobs) != 0 {
			t.Errorf("an empty digest has %d jobs", len(empty.Jobs))
		}
		if err := a.Apply(t.Context(), empty); err != nil {
			t.Fatal(err)
		}
		if after := count(); after[0] != before[0]+1 || after[1] != before[1]+1 || after[2] != before[2] {
			t.Errorf("the empty digest wrote %v → %v", before, after)
		}
		// Another digester that read the same latest digest (no event since:
		// the same to_seq) and a boundary of its own loses too.
		before = count()
		if err := a.Apply(t.Context(), decide("ann", b1.Add(25*time.Hour), last, full, transition.NewID(), now)); !errors.Is(err, store.ErrLostRace) {
			t.Errorf("a stale read with the same to_seq: %v, want a lost race", err)
		}
		if after := count(); after != before {
			t.Errorf("it wrote %v → %v", before, after)
		}
	})
}

// TestLatestIsIndexed: a person's latest digest is two index lookups,
// however many digests the table holds (the leader reads it for every
// person at every pass).
func TestLatestIsIndexed(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	storetest.NoTableScan(t, s, "the latest digest", LatestSQL, "ann", "ann")
}
