package transition_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// lose is the statement that makes a scriptedStore's batch a lost race.
var lose = store.Stmt(`-- lose`)

// scriptedStore answers Exec as told, without a database (what these tests
// check happens between sends): a batch holding lose is a lost race; with
// unknown set, every batch's outcome is unknown. It counts the sends.
type scriptedStore struct {
	store.Store
	unknown bool
	mu      sync.Mutex
	sent    int
}

func (s *scriptedStore) Exec(_ context.Context, batch ...store.Statement) ([]store.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	if s.unknown {
		return nil, fmt.Errorf("%w: connection reset", store.ErrUnknownOutcome)
	}
	for _, st := range batch {
		if st.SQL == lose.SQL {
			return nil, fmt.Errorf("%w: a guarded statement changed nothing", store.ErrLostRace)
		}
	}
	return make([]store.Result, len(batch)), nil
}

func (s *scriptedStore) sends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// TestUnknownOutcomeIsResentWithBackoffThenGivenUp: a batch whose outcome
// stays unknown is sent again after 100 ms, 200 ms, 400 ms …, Resends
// times, and not before; then Apply returns the unknown outcome.
func TestUnknownOutcomeIsResentWithBackoffThenGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scriptedStore{unknown: true}
		fc := clock.NewFake(start)
		a := &transition.Applier{Store: s, Clock: fc, Resends: 3}
		done := make(chan error, 1)
		go func() { done <- a.Apply(context.Background(), bump("w1", 1, "x")) }()
		for i, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
			synctest.Wait() // Apply waits for its resend
			fc.Advance(d - time.Millisecond)
			synctest.Wait() // … and still does, 1 ms before it is due
			if n := s.sends(); n != i+1 {
				t.Fatalf("%d sends %v after send %d, want the resend only after %v", n, d-time.Millisecond, i+1, d)
			}
			fc.Advance(time.Millisecond)
		}
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrUnknownOutcome) {
				t.Fatalf("apply: %v, want the unknown outcome", err)
			}
		default:
			t.Fatalf("Apply still runs after %d sends, want it to stop after 1 + Resends (3)", s.sends())
		}
		if n := s.sends(); n != 4 {
			t.Fatalf("%d sends, want 1 + Resends (3)", n)
		}
	})
}

// TestDoWithNothingToDoWritesNothing: a decide that finds nothing to do
// (nil, nil) ends Do at once, without a batch.
func TestDoWithNothingToDoWritesNothing(t *testing.T) {
	s := &scriptedStore{}
	a := &transition.Applier{Store: s, Clock: clock.NewFake(start)}
	calls := 0
	got, err := a.Do(context.Background(), func(context.Context) (*transition.Transition, error) { calls++; return nil, nil })
	if got != nil || err != nil || calls != 1 || s.sends() != 0 {
		t.Fatalf("Do: %v, %v after %d decides and %d sends, want nil, nil after 1 and 0", got, err, calls, s.sends())
	}
}

// TestLostRacesRetryInTurn: a writer that lost a race while another, which
// lost earlier, is retrying waits for its turn; it retries once the first
// committed.
func TestLostRacesRetryInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scriptedStore{}
		a := &transition.Applier{Store: s, Clock: clock.NewFake(start)}
		// decide loses its first race; its retry waits for hold (if any).
		decide := func(calls *atomic.Int32, hold chan struct{}) func(context.Context) (*transition.Transition, error) {
			return func(context.Context) (*transition.Transition, error) {
				tr := bump("w1", 1, "x")
				if calls.Add(1) == 1 {
					tr.Guarded = append(tr.Guarded, lose)
					return tr, nil
				}
				if hold != nil {
					<-hold
				}
				return tr, nil
			}
		}
		var first, second atomic.Int32
		hold := make(chan struct{})
		errs := make(chan error, 2)
		go func() { _, err := a.Do(context.Background(), decide(&first, hold)); errs <- err }()
		synctest.Wait() // the first lost, has its turn and retries: its decide waits
		go func() { _, err := a.Do(context.Background(), decide(&second, nil)); errs <- err }()
		synctest.Wait() // the second lost too
		if f, s := first.Load(), second.Load(); f != 2 || s != 1 {
			t.Fatalf("decides: first %d, second %d; want 2 and 1: the second must wait while the first retries", f, s)
		}
		close(hold)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if s := second.Load(); s != 2 {
			t.Fatalf("the second decided %d times, want 2", s)
		}
	})
}

// TestStaleIsAConflict: a lost race of a versioned write is the caller's
// conflict, naming what changed; other errors pass through.
func TestStaleIsAConflict(t *testing.T) {
	err := transition.Stale(fmt.Errorf("apply: %w", store.ErrLostRace), "the widget")
	if apperr.Code(err) != apperr.Conflict || !strings.Contains(err.Error(), "the widget was changed by someone else") {
		t.Fatalf("Stale(lost race) = %v (code %q), want a conflict naming the widget", err, apperr.Code(err))
	}
	other := errors.New("disk full")
	if err := transition.Stale(other, "the widget"); err != other {
		t.Fatalf("Stale(other) = %v, want it unchanged", err)
	}
}
