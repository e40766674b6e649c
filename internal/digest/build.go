package digest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// NeedsLister lists what waits for a principal, oldest first
// (needsme.Service).
type NeedsLister interface {
	List(ctx context.Context, p access.Principal, limit int) (needsme.List, error)
}

// ReadableResolver tells where a principal may read (access.Resolver).
type ReadableResolver interface {
	Readable(ctx context.Context, p access.Principal) (access.Readable, error)
}

// ItemFinder reads a ticket by id (tracker.Service).
type ItemFinder interface {
	FindItem(ctx context.Context, ref string) (tracker.Item, error)
}

// ProjectFinder reads projects and organizations (tenancy.Service).
type ProjectFinder interface {
	FindProject(ctx context.Context, ref string) (tenancy.Project, error)
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
}

// SpendReader reads spend (budget.Service).
type SpendReader interface {
	ProjectUsage(ctx context.Context, from, to time.Time) (map[string]budget.Usage, error)
	DayUsage(ctx context.Context, projectID string, t time.Time) (budget.Usage, error)
}

// MaxNeeds bounds the needs one digest lists (the rest are counted as
// truncated: the needs-me page has them all).
const MaxNeeds = needsme.DefaultLimit

// pageEvents is how many events one read of the log takes.
const pageEvents = 2000

// Builder builds digests: the content is the same for the mail and for
// GET /api/v1/me/digest.
type Builder struct {
	Store    store.Store
	Access   ReadableResolver
	Needs    NeedsLister
	Items    ItemFinder
	Projects ProjectFinder
	Spend    SpendReader
	// BaseURL is where links point (no trailing slash), e.g.
	// https://ballet.example.com.
	BaseURL string
}

// Build returns the digest of p for the events after from up to to, with
// what needs p at now and the spend since since. Only the projects p may
// read now are in it: where p lost access, nothing of the project is.
func (b *Builder) Build(ctx context.Context, p access.Principal, from, to int64, since, now time.Time) (Digest, error) {
	d := Digest{FromSeq: from, ToSeq: to, Since: since.UTC(), At: now.UTC(), Channels: []DigestChannel{}, Projects: []DigestProject{}}
	rd, err := b.Access.Readable(ctx, p)
	if err != nil {
		return d, fmt.Errorf("where the person may read: %w", err)
	}
	c := &collect{b: b, rd: rd, byKey: map[string]*DigestProject{}, byID: map[string]*DigestProject{}, oldest: map[*DigestProject]time.Time{}, filled: map[*DigestProject]bool{}}
	needs, err := b.Needs.List(ctx, p, MaxNeeds)
	if err != nil {
		return d, fmt.Errorf("what needs the person: %w", err)
	}
	d.NeedsTruncated = needs.Truncated
	for _, e := range needs.Items {
		if e.Item == "" { // a failing channel: no ticket, maybe no project
			d.Channels = append(d.Channels, DigestChannel{Kind: e.Kind, Org: e.Org, Project: e.Project, Webhook: e.Webhook, Title: e.Title,
				Since: e.Since, Detail: e.Detail, Link: b.link(channelPath(e))})
			continue
		}
		pr := c.projectByKey(e.Org, e.Project)
		pr.Needs = append(pr.Needs, DigestNeed{Kind: e.Kind, Item: e.Item, Title: e.Title, Since: e.Since, Detail: e.Detail,
			Link: b.link(itemPath(e.Item, needAnchor(e.Kind)))})
		if _, ok := c.oldest[pr]; !ok {
			c.oldest[pr] = e.Since // needs come oldest first
		}
	}
	if err := c.events(ctx, from, to); err != nil {
		return d, err
	}
	if err := c.spend(ctx, since, now); err != nil {
		return d, err
	}
	d.Needs = len(d.Channels)
	for _, pr := range c.list {
		d.Needs += len(pr.Needs)
		d.Finished += len(pr.Finished)
		d.Failures += len(pr.Failures)
		d.Projects = append(d.Projects, *pr)
	}
	slices.SortStableFunc(d.Projects, func(x, y DigestProject) int {
		ox, okx := c.oldest[c.byKey[x.Org+"/"+x.Project]]
		oy, oky := c.oldest[c.byKey[y.Org+"/"+y.Project]]
		switch {
		case okx && !oky:
			return -1
		case oky && !okx:
			return 1
		case okx && oky:
			if r := ox.Compare(oy); r != 0 {
				return r
			}
		}
		return cmp.Or(strings.Compare(x.Org, y.Org), strings.Compare(x.Project, y.Project))
	})
	d.Empty = d.Needs == 0 && d.Finished == 0 && d.Failures == 0
	d.Subject = SubjectLine(d)
	return d, nil
}

// collect gathers a digest's projects.
type collect struct {
	b      *Builder
	rd     access.Readable
	list   []*DigestProject
	byKey  map[string]*DigestProject // org slug/project key
	byID   map[string]*DigestProject // project id (those found by id)
	oldest map[*DigestProject]time.Time
	filled map[*DigestProject]bool // name and budget read
}

func (c *collect) projectByKey(org, key string) *DigestProject {
	if pr, ok := c.byKey[org+"/"+key]; ok {
		return pr
	}
	pr := &DigestProject{Org: org, Project: key, Link: c.b.link("/projects/" + key), Needs: []DigestNeed{}, Finished: []DigestFinished{}, Failures: []DigestFailure{}}
	c.byKey[org+"/"+key] = pr
	c.list = append(c.list, pr)
	return pr
}

// projectByID returns the digest's part of a project p may read (nil when
// p may not read it now, or it is gone).
func (c *collect) projectByID(ctx context.Context, orgID, projectID string) (*DigestProject, error) {
	if !c.readable(orgID, projectID) {
		return nil, nil
	}
	if pr, ok := c.byID[projectID]; ok {
		return pr, nil
	}
	proj, err := c.b.Projects.FindProject(ctx, projectID)
	if apperr.Code(err) == apperr.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	org, err := c.b.Projects.FindOrganization(ctx, proj.OrganizationID)
	if apperr.Code(err) == apperr.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pr := c.projectByKey(org.Slug, proj.Key)
	c.fill(pr, proj)
	c.byID[projectID] = pr
	return pr, nil
}

// fill sets a project's name and daily budget.
func (c *collect) fill(pr *DigestProject, proj tenancy.Project) {
	pr.Name = proj.Name
	if proj.Budgets.PerDayUSD != nil {
		v := *proj.Budgets.PerDayUSD
		pr.Spend.PerDay = &v
	}
	c.filled[pr] = true
}

// readable tells whether the principal may read the project now.
func (c *collect) readable(orgID, projectID string) bool {
	return c.rd.All || slices.Contains(c.rd.Orgs, orgID) || slices.Contains(c.rd.Projects, projectID)
}

// events reads the log after from up to to and adds what finished and
// what failed or got stuck in the projects the principal may read.
func (c *collect) events(ctx context.Context, from, to int64) error {
	for after := from; after < to; {
		evs, err := event.List(ctx, c.b.Store, event.Filter{AfterSeq: after, Limit: pageEvents})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for _, e := range evs {
			if e.Seq > to {
				return nil
			}
			if err := c.event(ctx, e); err != nil {
				return fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
			}
		}
		after = evs[len(evs)-1].Seq
	}
	return nil
}

// event adds what e tells, if anything.
func (c *collect) event(ctx context.Context, e event.Event) error {
	if e.ProjectID == "" || !c.readable(e.OrganizationID, e.ProjectID) {
		return nil
	}
	var add func(pr *DigestProject, it tracker.Item)
	flowID := ""
	if s, ok, err := event.Decode[tracker.TicketStateChanged](e); ok || err != nil {
		if err != nil || s.To != tracker.StateDone {
			return err
		}
		add = func(pr *DigestProject, it tracker.Item) {
			pr.Finished = append(pr.Finished, DigestFinished{Kind: FinishedTicket, Item: it.Key, Title: it.Title, At: e.OccurredAt,
				Link: c.b.link(itemPath(it.Key, ""))})
		}
		return c.onItem(ctx, e, e.EntityID, add)
	}
	if f, ok, err := event.Decode[flow.FlowFailed](e); ok || err != nil {
		if err != nil {
			return err
		}
		add = c.failure(e, FailureFailed, "flow", f.Reason, f.Report)
		flowID = e.EntityID
	}
	if f, ok, err := event.Decode[flow.FlowStuck](e); ok || err != nil {
		if err != nil {
			return err
		}
		add = c.failure(e, FailureStuck, "questions", f.Reason, "")
		flowID = e.EntityID
	}
	if add == nil {
		pos, done, err := stageDone(e)
		if err != nil || !done {
			return err
		}
		merged, pr, err := c.mergeStage(ctx, e.EntityID, pos)
		if err != nil || !merged {
			return err
		}
		flowID = e.EntityID
		add = func(p *DigestProject, it tracker.Item) {
			p.Finished = append(p.Finished, DigestFinished{Kind: FinishedMerge, Item: it.Key, Title: it.Title, At: e.OccurredAt,
				Link: c.b.link(itemPath(it.Key, "flow")), PullRequest: pr})
		}
	}
	f, err := flow.Read(ctx, c.b.Store, flowID)
	if apperr.Code(err) == apperr.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	return c.onItem(ctx, e, f.ItemID, add)
}

// failure adds a flow that failed or got stuck.
func (c *collect) failure(e event.Event, kind, anchor string, reasons ...string) func(*DigestProject, tracker.Item) {
	return func(pr *DigestProject, it tracker.Item) {
		pr.Failures = append(pr.Failures, DigestFailure{Kind: kind, Item: it.Key, Title: it.Title, At: e.OccurredAt,
			Reason: clip(cmp.Or(reasons...)), Link: c.b.link(itemPath(it.Key, anchor))})
	}
}

// onItem reads the ticket an event concerns and adds it to its project's
// part (nothing when the ticket or its project is gone or unreadable).
func (c *collect) onItem(ctx context.Context, e event.Event, itemID string, add func(*DigestProject, tracker.Item)) error {
	it, err := c.b.Items.FindItem(ctx, itemID)
	if apperr.Code(err) == apperr.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	pr, err := c.projectByID(ctx, it.OrganizationID, it.ProjectID)
	if err != nil || pr == nil {
		return err
	}
	add(pr, it)
	return nil
}

// stageDone tells whether e ends a stage done (flow.stage_finished or
// flow.done with outcome done), and where.
func stageDone(e event.Event) (flow.Position, bool, error) {
	if s, ok, err := event.Decode[flow.StageFinished](e); ok || err != nil {
		return s.Position, err == nil && s.Outcome == pipeline.OutcomeDone, err
	}
	if s, ok, err := event.Decode[flow.FlowDone](e); ok || err != nil {
		return s.Position, err == nil && s.Outcome == pipeline.OutcomeDone, err
	}
	return flow.Position{}, false, nil
}

// mergeStage tells whether the stage at pos of a flow is a merge (a
// platform stage: its done outcome is a merged pull request), and the
// pull request's page.
func (c *collect) mergeStage(ctx context.Context, flowID string, pos flow.Position) (bool, string, error) {
	evs, err := event.List(ctx, c.b.Store, event.Filter{EntityType: "flow", EntityID: flowID, Limit: event.MaxLimit})
	if err != nil {
		return false, "", err
	}
	merge, prURL := false, ""
	for _, e := range evs {
		if s, ok, err := event.Decode[flow.StageStarted](e); ok && err == nil && s.Stage == pos.Stage && s.Iteration == pos.Iteration {
			merge = s.Kind == pipeline.KindPlatform
		}
		if w, ok, err := event.Decode[flow.FlowWaiting](e); ok && err == nil && w.PullRequest != nil {
			prURL = w.PullRequest.URL
		}
	}
	if merge && prURL == "" {
		if f, err := flow.Read(ctx, c.b.Store, flowID); err == nil && f.PullRequest != nil {
			prURL = f.PullRequest.URL
		}
	}
	return merge, prURL, nil
}

// spend adds each readable project's spend: today's against its daily
// budget and the period's; a project with no spend in the period and
// nothing else in the digest is left out.
func (c *collect) spend(ctx context.Context, since, now time.Time) error {
	period, err := c.b.Spend.ProjectUsage(ctx, since, now.Add(time.Millisecond))
	if err != nil {
		return err
	}
	for _, id := range sortedKeys(period) {
		u := period[id]
		if u.Runs == 0 {
			continue
		}
		proj, err := c.b.Projects.FindProject(ctx, id)
		if apperr.Code(err) == apperr.NotFound {
			continue
		}
		if err != nil {
			return err
		}
		pr, err := c.projectByID(ctx, proj.OrganizationID, id)
		if err != nil {
			return err
		}
		if pr != nil {
			pr.Spend.Period, pr.Spend.Runs = budget.Spent(u.CostMicros), u.Runs
		}
	}
	for id, pr := range c.byID {
		today, err := c.b.Spend.DayUsage(ctx, id, now)
		if err != nil {
			return err
		}
		pr.Spend.Today = budget.Spent(today.CostMicros)
	}
	// Projects named only by needs (by key) get their name and budget too.
	for _, pr := range c.list {
		if c.filled[pr] {
			continue
		}
		proj, err := c.b.Projects.FindProject(ctx, pr.Project)
		if apperr.Code(err) == apperr.NotFound {
			continue
		}
		if err != nil {
			return err
		}
		c.fill(pr, proj)
		today, err := c.b.Spend.DayUsage(ctx, proj.ID, now)
		if err != nil {
			return err
		}
		pr.Spend.Today = budget.Spent(today.CostMicros)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// link is the absolute URL of a path of the web UI.
func (b *Builder) link(path string) string { return strings.TrimRight(b.BaseURL, "/") + path }

// itemPath is the path of a ticket's page, at a section.
func itemPath(key, anchor string) string {
	if anchor == "" {
		return "/items/" + key
	}
	return "/items/" + key + "#" + anchor
}

// channelPath is the page where an admin acts on a failing channel: the
// platform's mail status, a project's or an organization's webhooks.
func channelPath(e needsme.Entry) string {
	switch {
	case e.Kind == needsme.KindMailFailing:
		return "/platform#mail"
	case e.Project != "":
		return "/projects/" + e.Project + "/settings#webhooks"
	}
	return "/orgs#webhooks-" + e.Org
}

// needAnchor is the section of a ticket's page where a person acts on a
// need of kind.
func needAnchor(kind string) string {
	switch kind {
	case needsme.KindQuestion, needsme.KindStuck:
		return "questions"
	}
	return "flow"
}

// clip shortens s to one line of at most 280 characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 280 {
		return string(r[:279]) + "…"
	}
	return s
}
