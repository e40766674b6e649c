package flow

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// The entries of the organization's knowledge that an agent stage names
// (pipeline.Stage.Knowledge), fetched when its run is created and handed
// to the session in the run's artifacts, like the previous report.

// KnowledgeSource reads an entry of an organization's knowledge (the
// Knowledge client, with the service credential): apperr NotFound when it
// does not exist, apperr Invalid when the service refuses the name, any
// other error when the service cannot answer now.
type KnowledgeSource interface {
	Entry(ctx context.Context, org, space, slug string, version int64) (client.Entry, error)
}

// DefaultKnowledgeWait is how long a stage's entries are retried when
// Service.KnowledgeWait is not set ([knowledge] wait).
const DefaultKnowledgeWait = 10 * time.Minute

// MaxKnowledgeBody is how much of an entry's body a run's prompt carries:
// the rest is cut (the session reads it whole with read_entry).
const MaxKnowledgeBody = 32 << 10

// KnowledgeArtifact is an entry a stage names, as its run hands it over.
type KnowledgeArtifact struct {
	Space   string `json:"space"`
	Slug    string `json:"slug"`
	Title   string `json:"title"`
	Version int64  `json:"version"`
	Body    string `json:"body"`
	// Cut: Body is the first MaxKnowledgeBody bytes of the entry's.
	Cut bool `json:"cut,omitempty"`
}

// knowledgeFetch is what fetching a stage's entries came to: the entries,
// or the transition that flags the flow (an entry is missing, or the
// service stayed unavailable past the wait), or an error (a snooze until
// the next try).
type knowledgeFetch struct {
	entries []KnowledgeArtifact
	flag    *transition.Transition
}

// stageKnowledge fetches the entries stage names for flow f, entering the
// stage at now. The stage was entered when the flow last changed
// (f.UpdatedAt: nothing writes a flow while its enter step retries).
func (s *Service) stageKnowledge(ctx context.Context, f Flow, it tracker.Item, stage pipeline.Stage, now time.Time) (knowledgeFetch, error) {
	if len(stage.Knowledge) == 0 {
		return knowledgeFetch{}, nil
	}
	org, err := s.Tenancy.FindOrganization(ctx, f.OrganizationID)
	if err != nil {
		return knowledgeFetch{}, err
	}
	out := make([]KnowledgeArtifact, 0, len(stage.Knowledge))
	for _, ref := range stage.Knowledge {
		space, slug := pipeline.KnowledgeRef(ref)
		var e client.Entry
		err := client.ErrNotConfigured
		if s.Knowledge != nil {
			e, err = s.Knowledge.Entry(ctx, org.Slug, space, slug, 0)
		}
		if err == nil && e.Deleted {
			err = apperr.New(apperr.NotFound, "the entry was deleted")
		}
		switch code := apperr.Code(err); {
		case err == nil:
			out = append(out, knowledgeArtifact(e))
			continue
		case code == apperr.NotFound || code == apperr.Invalid:
			why := fmt.Sprintf("stage %s names the knowledge entry %s, which the Knowledge service of %s does not have (%s)", stage.ID, ref, org.Slug, reason(err))
			if code == apperr.Invalid {
				why = fmt.Sprintf("stage %s names the knowledge entry %s, which the Knowledge service refuses (%s)", stage.ID, ref, reason(err))
			}
			t, err := s.Flag(f, it, now, why)
			return knowledgeFetch{flag: t}, err
		}
		waited, wait := now.Sub(f.UpdatedAt), s.KnowledgeWait
		if wait <= 0 {
			wait = DefaultKnowledgeWait
		}
		if waited >= wait {
			t, err := s.Flag(f, it, now, fmt.Sprintf("the knowledge entries of stage %s could not be fetched for %s (%v)", stage.ID, waited.Round(time.Second), err))
			return knowledgeFetch{flag: t}, err
		}
		retry := KnowledgeRetry(waited, wait-waited)
		s.Log.Warn("the knowledge entries of a stage could not be fetched: retrying", "flow", f.ID, "ticket", it.Key, "stage", stage.ID,
			"entry", ref, "retry_in", retry, "err", err)
		return knowledgeFetch{}, job.Snooze(retry)
	}
	return knowledgeFetch{entries: out}, nil
}

// KnowledgeRetry is how long a stage whose entries could not be fetched
// waits before the next try, having waited so far since it was entered,
// with left until it is flagged: as long as it has waited (2 s at least,
// a minute at most), never past the flag (and at least a second).
func KnowledgeRetry(waited, left time.Duration) time.Duration {
	d := min(max(waited, 2*time.Second), time.Minute)
	return max(min(d, left), time.Second)
}

// knowledgeArtifact is an entry as a run hands it over, its body cut at
// MaxKnowledgeBody (on a character boundary).
func knowledgeArtifact(e client.Entry) KnowledgeArtifact {
	a := KnowledgeArtifact{Space: e.Space, Slug: e.Slug, Title: e.Title, Version: e.Version, Body: e.Body}
	if len(a.Body) > MaxKnowledgeBody {
		n := MaxKnowledgeBody
		for n > 0 && !utf8.RuneStart(a.Body[n]) {
			n--
		}
		a.Body, a.Cut = a.Body[:n], true
	}
	return a
}

// reason is an error's message for a person: an application error's own
// message, else the whole error.
func reason(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
