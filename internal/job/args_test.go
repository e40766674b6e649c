package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/job"
)

// widgetArgs are a test job's arguments, with a dedupe key.
type widgetArgs struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

func (widgetArgs) Kind() string        { return "widget.count" }
func (a widgetArgs) DedupeKey() string { return "widget:" + a.ID }

// plainArgs have no dedupe key.
type plainArgs struct{}

func (plainArgs) Kind() string { return "plain" }

type table map[string]job.Handler

func (t table) Handle(kind string, h job.Handler) { t[kind] = h }

// TestTypedJobs: New makes the spec of a job from its arguments (kind,
// payload, dedupe key when it has one); Register hands the handler the
// payload decoded into the same type; a payload that does not decode makes
// the job dead without calling the handler.
func TestTypedJobs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := job.New(widgetArgs{ID: "w1", Count: 3}).At(now)
	if s.Kind != "widget.count" || s.DedupeKey != "widget:w1" || !s.RunAt.Equal(now) || s.Payload != (widgetArgs{ID: "w1", Count: 3}) {
		t.Fatalf("spec %+v", s)
	}
	if p := job.New(plainArgs{}); p.Kind != "plain" || p.DedupeKey != "" || !p.RunAt.IsZero() {
		t.Fatalf("spec without a key %+v", p)
	}
	st, err := s.Insert("id1", now)
	if err != nil || st.Args[2] != `{"id":"w1","count":3}` {
		t.Fatalf("insert %v: %v", st.Args, err)
	}

	handlers := table{}
	var got []widgetArgs
	job.Register(handlers, func(_ context.Context, j *job.Job, a widgetArgs) error {
		got = append(got, a)
		return nil
	})
	h, ok := handlers["widget.count"]
	if !ok || len(handlers) != 1 {
		t.Fatalf("registered %v", handlers)
	}
	if err := h(context.Background(), &job.Job{ID: "id1", Kind: "widget.count", Payload: []byte(st.Args[2].(string))}); err != nil {
		t.Fatal(err)
	}
	err = h(context.Background(), &job.Job{ID: "id2", Kind: "widget.count", Payload: []byte(`{"id": 7}`)})
	if !job.IsPermanent(err) || len(got) != 1 || got[0] != (widgetArgs{ID: "w1", Count: 3}) {
		t.Fatalf("got %+v, bad payload: %v", got, err)
	}
	var perm interface{ Unwrap() error }
	if !errors.As(err, &perm) {
		t.Fatalf("a bad payload's error %v does not wrap its cause", err)
	}
}
