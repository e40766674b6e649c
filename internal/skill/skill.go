// Package skill holds a project's skills — the instructions agent sessions
// receive — with every version kept. It owns the tables skills and
// skill_versions. Each change is read, decided in pure code and written as
// one transition batch with exactly one event (skill.<change>).
package skill

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Service reads and changes skills.
//
// Every domain has a Service of its own over the store, the applier and
// the clock (one per domain, as STYLE.md's layout has it): what looks alike
// across domains' Service types is that layout, not shared logic.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
}

// New returns a Service.
func New(s store.Store, a *transition.Applier, c clock.Clock) *Service {
	return &Service{Store: s, Applier: a, Clock: c}
}

// now is the current time at the precision times are stored with.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }

// SkillChanged is what a skill's events carry: its name and its version
// after the change.
type SkillChanged struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// Payloads of skill.created, skill.updated and skill.deleted.
type (
	SkillCreated SkillChanged
	SkillUpdated SkillChanged
	SkillDeleted SkillChanged
)

func (SkillCreated) EventType() string { return "skill.created" }
func (SkillUpdated) EventType() string { return "skill.updated" }
func (SkillDeleted) EventType() string { return "skill.deleted" }

// Events are the payload types of the events skills write.
var Events = []event.Payload{SkillCreated{}, SkillUpdated{}, SkillDeleted{}}

// Skill limits.
const (
	MaxSkillDescription = 1 << 10   // bytes
	MaxSkillContent     = 256 << 10 // bytes
)

// Skill is a project skill, as agent sessions receive it: its current
// version (or, read with a version number, an older one).
type Skill struct {
	ID          string    `json:"id"`
	ProjectID   string    `json:"project_id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Content     string    `json:"content"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"` // when this version was written
	UpdatedBy   string    `json:"updated_by"` // who wrote this version
	Version     int64     `json:"version"`
}

// SkillVersion describes one kept version of a skill (its content is read
// with GET …/skills/{name}?version=N).
type SkillVersion struct {
	SkillID      string    `json:"skill_id"`
	Version      int64     `json:"version"`
	Name         string    `json:"name"`
	Description  string    `json:"description"`
	ContentBytes int       `json:"content_bytes"`
	Deleted      bool      `json:"deleted"`
	CreatedBy    string    `json:"created_by"`
	CreatedAt    time.Time `json:"created_at"`
}

// Input is a new skill.
type Input struct {
	Name        string
	Description string
	Content     string
}

// Patch changes a skill's description, its content or both: what is nil
// stays.
type Patch struct {
	Description *string
	Content     *string
}

var skillNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidSkillName reports whether name can name a skill.
func ValidSkillName(name string) bool { return skillNameRE.MatchString(name) }

func validateSkillText(v *apperr.Validator, description, content string) {
	v.Check(len(description) <= MaxSkillDescription, "description", "is %d bytes: at most %d (1 KiB)", len(description), MaxSkillDescription)
	v.CheckErr("description", text.Multiline(description))
	v.Check(content != "", "content", "is required: the instructions agent sessions receive")
	v.Check(len(content) <= MaxSkillContent, "content", "is %d bytes: at most %d (256 KiB)", len(content), MaxSkillContent)
	v.CheckErr("content", text.Multiline(content))
}

const skillColumns = `id, project_id, name, description, content, created_at, updated_at, updated_by, version`

func scanSkill(rows *store.Rows, i int) (Skill, error) {
	var k Skill
	var c, u int64
	if err := rows.Scan(i, &k.ID, &k.ProjectID, &k.Name, &k.Description, &k.Content, &c, &u, &k.UpdatedBy, &k.Version); err != nil {
		return k, fmt.Errorf("scan skill: %w", err)
	}
	k.CreatedAt, k.UpdatedAt = store.Time(c), store.Time(u)
	return k, nil
}

// skillEvent builds an event of skill k; kind gives it its payload type
// (SkillCreated, SkillUpdated or SkillDeleted).
func skillEvent(actor event.Actor, p tenancy.Project, k Skill, kind func(SkillChanged) event.Payload) event.Event {
	return event.Of(actor, p.OrganizationID, p.ID, k.ID, kind(SkillChanged{Name: k.Name, Version: k.Version}))
}

// The kinds of skill events, for skillEvent.
func created(c SkillChanged) event.Payload { return SkillCreated(c) }
func updated(c SkillChanged) event.Payload { return SkillUpdated(c) }
func deleted(c SkillChanged) event.Payload { return SkillDeleted(c) }

func insertSkillVersion(k Skill, deleted bool, by string, at time.Time) store.Statement {
	return store.Stmt(`INSERT INTO skill_versions (skill_id, version, name, description, content, deleted, created_by, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, k.ID, k.Version, k.Name, k.Description, k.Content, deleted, by, at.UnixMilli())
}

// List lists a project's skills (not deleted) by name.
func (s *Service) List(ctx context.Context, projectID string) ([]Skill, error) {
	rows, err := s.Store.Query(ctx, `SELECT `+skillColumns+` FROM skills WHERE project_id = ? AND deleted = 0 ORDER BY name`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	return store.ScanAll(rows, scanSkill)
}

// ForRun returns the skills an agent session of the project gets:
// those named in allowed, or every skill when allowed is empty; by name.
// Names that match no skill are left out (the caller compares if it must).
func (s *Service) ForRun(ctx context.Context, projectID string, allowed []string) ([]Skill, error) {
	all, err := s.List(ctx, projectID)
	if err != nil || len(allowed) == 0 {
		return all, err
	}
	want := make(map[string]bool, len(allowed))
	for _, n := range allowed {
		want[n] = true
	}
	out := []Skill{}
	for _, k := range all {
		if want[k.Name] {
			out = append(out, k)
		}
	}
	return out, nil
}

// Find returns the project's current skill of that name.
func (s *Service) Find(ctx context.Context, projectID, name string) (Skill, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("skill %q", name), `SELECT `+skillColumns+` FROM skills WHERE project_id = ? AND name = ? AND deleted = 0`,
		projectID, name)
	if err != nil {
		return Skill{}, err
	}
	return scanSkill(rows, 0)
}

// FindVersion returns version n of the project's current skill of
// that name.
func (s *Service) FindVersion(ctx context.Context, projectID, name string, n int64) (Skill, error) {
	k, err := s.Find(ctx, projectID, name)
	if err != nil || n == k.Version {
		return k, err
	}
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("version %d of skill %q", n, name),
		`SELECT name, description, content, created_by, created_at FROM skill_versions WHERE skill_id = ? AND version = ?`, k.ID, n)
	if err != nil {
		return Skill{}, err
	}
	var at int64
	if err := rows.Scan(0, &k.Name, &k.Description, &k.Content, &k.UpdatedBy, &at); err != nil {
		return Skill{}, err
	}
	k.UpdatedAt, k.Version = store.Time(at), n
	return k, nil
}

// Versions lists every version of the project's current skill of
// that name, newest first.
func (s *Service) Versions(ctx context.Context, projectID, name string) ([]SkillVersion, error) {
	k, err := s.Find(ctx, projectID, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.Query(ctx, `SELECT skill_id, version, name, description, LENGTH(CAST(content AS BLOB)), deleted, created_by, created_at
FROM skill_versions WHERE skill_id = ? ORDER BY version DESC`, k.ID)
	if err != nil {
		return nil, fmt.Errorf("list skill versions: %w", err)
	}
	out := make([]SkillVersion, rows.Len())
	for i := range out {
		v := &out[i]
		var at int64
		if err := rows.Scan(i, &v.SkillID, &v.Version, &v.Name, &v.Description, &v.ContentBytes, &v.Deleted, &v.CreatedBy, &at); err != nil {
			return nil, fmt.Errorf("scan skill version: %w", err)
		}
		v.CreatedAt = store.Time(at)
	}
	return out, nil
}

// Create adds a skill to a project. A name in use is a conflict; a
// deleted skill's name can be used again.
func (s *Service) Create(ctx context.Context, actor event.Actor, p tenancy.Project, in Input) (Skill, error) {
	var v apperr.Validator
	v.Check(ValidSkillName(in.Name), "name", "%q must be a lower-case letter or digit, then up to 63 lower-case letters, digits, _ or -", in.Name)
	validateSkillText(&v, in.Description, in.Content)
	if err := v.Err(); err != nil {
		return Skill{}, err
	}
	now := s.now()
	k := Skill{ID: transition.NewID(), ProjectID: p.ID, Name: in.Name, Description: in.Description, Content: in.Content,
		CreatedAt: now, UpdatedAt: now, UpdatedBy: actor.Sub, Version: 1}
	t := &transition.Transition{
		Events: []event.Event{skillEvent(actor, p, k, created)},
		Statements: []store.Statement{
			store.Stmt(`INSERT INTO skills (`+skillColumns+`, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0)`,
				k.ID, p.ID, k.Name, k.Description, k.Content, now.UnixMilli(), now.UnixMilli(), actor.Sub),
			insertSkillVersion(k, false, actor.Sub, now),
		},
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		// The index is on (project_id, name); store.UniqueOn reads only the
		// first column of a multi-column message.
		if errors.Is(err, store.ErrUnique) && strings.Contains(err.Error(), "skills.name") {
			return Skill{}, apperr.New(apperr.Conflict, "project %s already has a skill named %q", p.Key, in.Name)
		}
		return Skill{}, err
	}
	return k, nil
}

// Update writes a new version of a skill over the version the caller
// read; a stale version is a conflict.
func (s *Service) Update(ctx context.Context, actor event.Actor, p tenancy.Project, name string, version int64, in Patch) (Skill, error) {
	var v apperr.Validator
	v.Check(version >= 1, "version", "is required: the version you read")
	v.Check(in.Description != nil || in.Content != nil, "content", "nothing to change: send description and/or content")
	if err := v.Err(); err != nil {
		return Skill{}, err
	}
	k, err := s.Find(ctx, p.ID, name)
	if err != nil {
		return Skill{}, err
	}
	k, t, err := update(actor, p, k, version, in, s.now())
	if err != nil {
		return Skill{}, err
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		return Skill{}, transition.Stale(err, fmt.Sprintf("skill %q", name))
	}
	return k, nil
}

// update decides a new version of skill k of p (as read) from the patch,
// over the version the caller read.
func update(actor event.Actor, p tenancy.Project, k Skill, version int64, in Patch, now time.Time) (Skill, *transition.Transition, error) {
	if in.Description != nil {
		k.Description = *in.Description
	}
	if in.Content != nil {
		k.Content = *in.Content
	}
	var v apperr.Validator
	validateSkillText(&v, k.Description, k.Content)
	if err := v.Err(); err != nil {
		return Skill{}, nil, err
	}
	if k.Version != version {
		return Skill{}, nil, transition.Stale(store.ErrLostRace, fmt.Sprintf("skill %q", k.Name))
	}
	k.Version, k.UpdatedAt, k.UpdatedBy = version+1, now, actor.Sub
	return k, &transition.Transition{
		Events: []event.Event{skillEvent(actor, p, k, updated)},
		Guarded: []store.Statement{store.Stmt(`UPDATE skills SET description = ?, content = ?, updated_at = ?, updated_by = ?, version = version + 1
WHERE id = ? AND version = ? AND deleted = 0`, k.Description, k.Content, now.UnixMilli(), actor.Sub, k.ID, version)},
		Statements: []store.Statement{insertSkillVersion(k, false, actor.Sub, now)},
	}, nil
}

// Delete deletes a skill: it writes a final version marked deleted
// and frees the name. The versions stay.
func (s *Service) Delete(ctx context.Context, actor event.Actor, p tenancy.Project, name string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		k, err := s.Find(ctx, p.ID, name)
		if err != nil {
			return nil, err
		}
		return remove(actor, p, k, s.now()), nil
	})
	return err
}

// remove decides deleting skill k of p (as read): a final version marked
// deleted.
func remove(actor event.Actor, p tenancy.Project, k Skill, now time.Time) *transition.Transition {
	read := k.Version
	k.Version++
	return &transition.Transition{
		Events: []event.Event{skillEvent(actor, p, k, deleted)},
		Guarded: []store.Statement{store.Stmt(`UPDATE skills SET deleted = 1, updated_at = ?, updated_by = ?, version = version + 1
WHERE id = ? AND version = ? AND deleted = 0`, now.UnixMilli(), actor.Sub, k.ID, read)},
		Statements: []store.Statement{insertSkillVersion(k, true, actor.Sub, now)},
	}
}
