package run

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Runner limits.
const (
	MaxRunnerName = 200
	MaxLabels     = 32
	MaxLabelValue = 200
)

var labelRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// Runner is a registered Runner process. It is bound to the runner token
// that registered it: only that token finds it. A token may register
// several runners (several processes on one host, or one process after a
// restart: each registration is a new runner; old ones simply stop being
// seen).
type Runner struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	TokenID    string            `json:"token_id"`
	Labels     map[string]string `json:"labels"`
	CreatedAt  time.Time         `json:"created_at"`
	LastSeenAt time.Time         `json:"last_seen_at"`
	Version    int64             `json:"version"`
}

// RunnerInput is a runner registering.
type RunnerInput struct {
	Name   string
	Labels map[string]string
}

func (in RunnerInput) validate() error {
	var v apperr.Validator
	name := strings.TrimSpace(in.Name)
	v.Check(name != "" && utf8.RuneCountInString(name) <= MaxRunnerName, "name", "must be 1–%d characters", MaxRunnerName)
	v.CheckErr("name", text.Line(name))
	v.Check(len(in.Labels) <= MaxLabels, "labels", "at most %d labels", MaxLabels)
	for k, val := range in.Labels {
		v.Check(labelRE.MatchString(k), "labels."+k, "the label name must match [a-z][a-z0-9_.-]{0,63}")
		v.Check(utf8.RuneCountInString(val) <= MaxLabelValue, "labels."+k, "must be at most %d characters", MaxLabelValue)
		v.CheckErr("labels."+k, text.Line(val))
	}
	return v.Err()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	return b
}

// RegisterRunner registers a runner for the runner token p (event
// runner.registered).
func (s *Service) RegisterRunner(ctx context.Context, p *auth.Principal, in RunnerInput) (Runner, error) {
	if err := AuthorizeRunner(p); err != nil {
		return Runner{}, err
	}
	if err := in.validate(); err != nil {
		return Runner{}, err
	}
	labels := in.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	now := s.now()
	rn := Runner{ID: transition.NewID(), Name: strings.TrimSpace(in.Name), TokenID: p.TokenID, Labels: labels,
		CreatedAt: now, LastSeenAt: now, Version: 1}
	e := event.Event{EntityType: "runner", EntityID: rn.ID, Type: "runner.registered", Payload: event.MustPayload(rn)}
	e.SetActor(p.Actor())
	err := s.applier.Apply(ctx, &transition.Transition{
		Events: []event.Event{e},
		Statements: []store.Statement{store.Stmt(`INSERT INTO runners (id, name, token_id, labels, created_at, last_seen_at, version)
VALUES (?, ?, ?, ?, ?, ?, 1)`, rn.ID, rn.Name, rn.TokenID, string(mustJSON(labels)), now.UnixMilli(), now.UnixMilli())},
	})
	if err != nil {
		return Runner{}, err
	}
	return rn, nil
}

// FindRunner returns the runner with the id if the runner token p
// registered it; any other runner is not found.
func (s *Service) FindRunner(ctx context.Context, p *auth.Principal, id string) (Runner, error) {
	if err := AuthorizeRunner(p); err != nil {
		return Runner{}, err
	}
	rows, err := s.store.Query(ctx, `SELECT id, name, token_id, labels, created_at, last_seen_at, version FROM runners WHERE id = ?`, id)
	if err != nil {
		return Runner{}, fmt.Errorf("read runner: %w", err)
	}
	notFound := apperr.New(apperr.NotFound, "runner %q not found", id)
	if rows.Len() == 0 {
		return Runner{}, notFound
	}
	var rn Runner
	var labels string
	var created, seen int64
	if err := rows.Scan(0, &rn.ID, &rn.Name, &rn.TokenID, &labels, &created, &seen, &rn.Version); err != nil {
		return Runner{}, fmt.Errorf("scan runner: %w", err)
	}
	if rn.TokenID != p.TokenID {
		return Runner{}, notFound
	}
	if err := json.Unmarshal([]byte(labels), &rn.Labels); err != nil {
		return Runner{}, fmt.Errorf("runner %s labels: %w", rn.ID, err)
	}
	rn.CreatedAt, rn.LastSeenAt = store.Time(created), store.Time(seen)
	return rn, nil
}

// touchRunner records that a runner was seen (last_seen_at: an operational
// column, written without an event).
func (s *Service) touchRunner(ctx context.Context, rn Runner) (time.Time, error) {
	now := s.now()
	_, err := s.store.Exec(ctx, store.Stmt(`UPDATE runners SET last_seen_at = MAX(last_seen_at, ?) WHERE id = ?`, now.UnixMilli(), rn.ID))
	if err != nil {
		return now, fmt.Errorf("touch runner %s: %w", rn.ID, err)
	}
	return now, nil
}

// RunnerHeartbeat records that the runner is alive (last_seen_at; no
// event). A run's liveness is its own heartbeat: this one keeps no run
// alive.
func (s *Service) RunnerHeartbeat(ctx context.Context, p *auth.Principal, runnerID string) (Runner, error) {
	rn, err := s.FindRunner(ctx, p, runnerID)
	if err != nil {
		return Runner{}, err
	}
	now, err := s.touchRunner(ctx, rn)
	if err != nil {
		return Runner{}, err
	}
	if now.After(rn.LastSeenAt) {
		rn.LastSeenAt = now
	}
	return rn, nil
}
