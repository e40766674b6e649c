// Package knowledge is the Knowledge service's domain (issue 17): spaces per
// organization, entries (a path-like slug, a title, a Markdown body, tags)
// whose every edit is a new immutable version, soft deletion, and their
// full-text search. Every change is read → decide in pure code → one batch
// (ADR-0016, transition.Applier): the guarded update of the entry, its new
// version row, its search index row and its event commit together or not at
// all. It knows nothing of HTTP or of Core: callers pass the organization
// (its slug) and the actor they resolved.
package knowledge

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the service's schema, applied to its own database.
var Migrations = store.MigrationSet{FS: sub(migrationFiles, "migrations")}

func sub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}

// DefaultSpace is the space every organization has.
const DefaultSpace = "default"

// Limits of what an entry holds.
const (
	MaxSlug     = 200
	MaxTitle    = 300
	MaxBody     = 512 << 10 // bytes of Markdown
	MaxTags     = 20
	MaxTag      = 50
	MaxNote     = 500
	MaxSpace    = 40
	MaxSpaceDoc = 2000
)

var (
	// slugRE: lower-case segments of letters, digits, dots, dashes and
	// underscores, separated by single slashes ("guides/deploy-v2").
	slugRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$`)
	spaceSlugRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	tagRE       = regexp.MustCompile(`^[\p{Ll}\p{Lo}\p{N}][\p{Ll}\p{Lo}\p{N}._-]*$`)
)

// Space is a named collection of an organization's entries.
type Space struct {
	Slug        string    `json:"slug"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	CreatedBy   string    `json:"created_by"`
}

// Entry is an entry at one of its versions (the current one unless asked).
// Core's client (knowledge/client.Entry) reads its JSON with a type of its
// own, on purpose: Core does not import the service's domain.
type Entry struct {
	ID        string    `json:"-"`
	Space     string    `json:"space"`
	Slug      string    `json:"slug"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Tags      []string  `json:"tags"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
	Deleted   bool      `json:"deleted"`
	Note      string    `json:"note,omitempty"`
}

// Version is one immutable version of an entry.
type Version struct {
	Version int64     `json:"version"`
	Title   string    `json:"title"`
	Body    string    `json:"body"`
	Tags    []string  `json:"tags"`
	Author  string    `json:"author"`
	At      time.Time `json:"at"`
	Note    string    `json:"note"`
}

// Event payloads, one type per event type (Events lists them).
type (
	// SpaceCreated is space.created's.
	SpaceCreated struct {
		Slug  string `json:"slug"`
		Title string `json:"title"`
	}
	// EntryPayload is what an entry's events carry: the entry's version
	// after the change (restored: RestoredFrom names the version it copies).
	EntryPayload struct {
		Space        string `json:"space"`
		Slug         string `json:"slug"`
		Version      int64  `json:"version"`
		Title        string `json:"title"`
		Note         string `json:"note,omitempty"`
		RestoredFrom int64  `json:"restored_from,omitempty"`
	}
)

type (
	EntryCreated   EntryPayload // entry.created
	EntryUpdated   EntryPayload // entry.updated
	EntryRestored  EntryPayload // entry.restored
	EntryDeleted   EntryPayload // entry.deleted
	EntryUndeleted EntryPayload // entry.undeleted
)

func (SpaceCreated) EventType() string   { return "space.created" }
func (EntryCreated) EventType() string   { return "entry.created" }
func (EntryUpdated) EventType() string   { return "entry.updated" }
func (EntryRestored) EventType() string  { return "entry.restored" }
func (EntryDeleted) EventType() string   { return "entry.deleted" }
func (EntryUndeleted) EventType() string { return "entry.undeleted" }

// Events are the payload types of the events the service writes.
var Events = []event.Payload{SpaceCreated{}, EntryCreated{}, EntryUpdated{}, EntryRestored{}, EntryDeleted{}, EntryUndeleted{}}

// Service keeps spaces and entries in the service's store.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	// Retrievers are searched besides the full-text index, their results
	// fused with its own: the seam for embeddings. None is built yet.
	Retrievers []Retriever
}

// New returns a Service on st (a nil clock is clock.Real).
func New(st store.Store, clk clock.Clock) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Service{Store: st, Applier: &transition.Applier{Store: st, Clock: clk}, Clock: clk}
}

// ---- validation (pure) ----

// CheckSpaceSlug checks a space's slug (field names the input field).
func CheckSpaceSlug(v *apperr.Validator, field, s string) {
	v.Check(len(s) <= MaxSpace && spaceSlugRE.MatchString(s), field,
		"%q must be 1–%d lower-case letters, digits or dashes, not starting or ending with a dash", s, MaxSpace)
}

// CheckSlug checks an entry's slug.
func CheckSlug(v *apperr.Validator, field, s string) {
	v.Check(len(s) <= MaxSlug && slugRE.MatchString(s), field,
		"%q must be 1–%d characters of path-like segments (lower-case letters, digits, '.', '_', '-') separated by single '/', such as \"guides/deploy\"", s, MaxSlug)
}

func checkLine(v *apperr.Validator, field, s string, max int, required bool) {
	if required && strings.TrimSpace(s) == "" {
		v.Add(field, "must not be empty")
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		v.Add(field, "has %d characters; at most %d", n, max)
		return
	}
	v.CheckErr(field, text.Line(s))
}

// normTags checks tags (the input field named field) and returns them
// lower-cased, deduplicated and sorted.
func normTags(v *apperr.Validator, field string, tags []string) []string {
	if len(tags) > MaxTags {
		v.Add(field, "has %d tags; at most %d", len(tags), MaxTags)
		return nil
	}
	out := []string{}
	for i, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if utf8.RuneCountInString(t) > MaxTag || !tagRE.MatchString(t) {
			v.Add(fmt.Sprintf("%s[%d]", field, i), "%q must be 1–%d letters, digits, '.', '_' or '-', starting with a letter or digit", tags[i], MaxTag)
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// Content is what a save writes: the entry's title, body, tags and the
// change's note.
type Content struct {
	Title string
	Body  string
	Tags  []string
	Note  string
}

// check validates c and returns it with its tags normalised.
func (c Content) check(v *apperr.Validator) Content {
	checkLine(v, "title", c.Title, MaxTitle, true)
	if len(c.Body) > MaxBody {
		v.Add("body", "has %d bytes; at most %d", len(c.Body), MaxBody)
	} else {
		v.CheckErr("body", text.Multiline(c.Body))
	}
	checkLine(v, "note", c.Note, MaxNote, false)
	c.Tags = normTags(v, "tags", c.Tags)
	return c
}

func (c Content) same(e Entry) bool {
	return c.Title == e.Title && c.Body == e.Body && slices.Equal(c.Tags, e.Tags)
}

// ---- helpers ----

func tagsJSON(tags []string) string {
	if tags == nil {
		tags = []string{}
	}
	b, _ := json.Marshal(tags) // strings always encode
	return string(b)
}

func parseTags(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("stored tags %q: %w", s, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// query reads through the service's store.
func (s *Service) query(ctx context.Context, sql string, args ...any) (*store.Rows, error) {
	return s.Store.Query(ctx, sql, args...)
}

// entryEvent builds an event of entry e; kind makes its payload type of
// the data every entry event carries (EntryCreated, EntryUpdated…).
func entryEvent[P event.Payload](actor event.Actor, org string, e Entry, kind func(EntryPayload) P, restoredFrom int64) event.Event {
	return event.Of(actor, org, "", e.ID, kind(EntryPayload{Space: e.Space, Slug: e.Slug,
		Version: e.Version, Title: e.Title, Note: e.Note, RestoredFrom: restoredFrom}))
}

// The kinds of entry events, for entryEvent.
func created(p EntryPayload) EntryCreated     { return EntryCreated(p) }
func updated(p EntryPayload) EntryUpdated     { return EntryUpdated(p) }
func restored(p EntryPayload) EntryRestored   { return EntryRestored(p) }
func deletion(p EntryPayload) event.Payload   { return EntryDeleted(p) }
func undeletion(p EntryPayload) event.Payload { return EntryUndeleted(p) }
