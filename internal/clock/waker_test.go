package clock

import (
	"context"
	"testing"
	"time"
)

// TestWaker: a loop waits for a nudge or its interval, whichever comes
// first; nudges made while it is busy coalesce into one run; a nudge never
// blocks; an ended context ends the wait.
func TestWaker(t *testing.T) {
	clk := NewFake(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	w := NewWaker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := func() <-chan bool {
		ch := make(chan bool, 1)
		go func() { ch <- w.Wait(ctx, clk, time.Minute) }()
		return ch
	}

	// A nudge wakes it before the interval.
	w.Nudge()
	if !<-wait() {
		t.Fatal("a nudged wait reported an ended context")
	}
	// Three nudges while busy are one pending run, then it waits again.
	w.Nudge()
	w.Nudge()
	w.Nudge()
	<-wait()
	got := wait()
	clk.BlockUntil(1)
	select {
	case <-got:
		t.Fatal("three coalesced nudges woke the loop twice")
	default:
	}
	// The interval wakes it without a nudge.
	clk.Advance(time.Minute)
	if !<-got {
		t.Fatal("the interval's wake reported an ended context")
	}
	// An ended context ends the wait with false.
	got = wait()
	clk.BlockUntil(1)
	cancel()
	if <-got {
		t.Fatal("a wait whose context ended reported a wake")
	}
}
