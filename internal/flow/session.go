package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/secret"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
)

// ProjectSource finds a project by id: tenancy.Service.FindProject.
type ProjectSource interface {
	FindProject(ctx context.Context, id string) (tenancy.Project, error)
	// FindOrganization: the project's organization, whose slug its
	// credentials_ref resolves for.
	FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
}

// SkillSource returns a project's skills that a stage allows (all when it
// names none): skill.Service.ForRun.
type SkillSource interface {
	ForRun(ctx context.Context, projectID string, allowed []string) ([]skill.Skill, error)
}

// Sessions builds the session a leased run carries (run.SessionSource):
// the ticket, the stage as the flow's pinned pipeline defines it, the
// skills it allows with their contents, the previous report, the answered
// questions and the knowledge entries the stage names (the run's
// artifacts), the project's repository and
// its credential, Core's MCP endpoint and the log limit.
type Sessions struct {
	Store    store.Store
	Projects ProjectSource
	Skills   SkillSource
	// MCPURL is Core's MCP endpoint as sessions reach it.
	MCPURL string
	// LogLimit is how many bytes of a run's log Core keeps.
	LogLimit int64
	// Secrets resolves the project's credentials_ref under the platform's
	// policy (nil: none resolves).
	Secrets forge.Secrets
}

// Session implements run.SessionSource. A repository credential that
// cannot be resolved, or that the platform's policy refuses, makes the run
// unrunnable (run.ErrUnrunnable): the session could not clone or push, and
// nothing of the credential leaves Core.
func (s *Sessions) Session(ctx context.Context, r run.Run) (runproto.Session, error) {
	var a Artifacts
	if err := json.Unmarshal(r.Artifacts, &a); err != nil {
		return runproto.Session{}, fmt.Errorf("run %s artifacts: %w", r.ID, err)
	}
	f, err := Read(ctx, s.Store, r.FlowID)
	if err != nil {
		return runproto.Session{}, err
	}
	stage, _ := f.Definition.Stage(r.Stage)
	ss := runproto.Session{
		Ticket: runproto.SessionTicket(a.Ticket),
		Stage: runproto.SessionStage{ID: r.Stage, Name: stage.Name, Instructions: r.Instructions, Adapter: r.Adapter, Model: r.StageModel,
			TimeoutSeconds: int(stage.Timeout().Seconds()), Iteration: r.Iteration, MaxIterations: f.MaxIterations},
		Skills:            []runproto.SessionSkill{},
		AnsweredQuestions: make([]runproto.SessionAnswer, len(a.AnsweredQuestions)),
		Knowledge:         make([]runproto.SessionEntry, len(a.Knowledge)),
		MCP:               runproto.SessionMCP{URL: s.MCPURL},
		Log:               runproto.SessionLog{Limit: s.LogLimit},
	}
	if ss.Stage.Name == "" {
		ss.Stage.Name = r.Stage
	}
	if a.PreviousReport != nil {
		ss.PreviousReport = (*runproto.SessionReport)(a.PreviousReport)
	}
	for i, q := range a.AnsweredQuestions {
		ss.AnsweredQuestions[i] = runproto.SessionAnswer(q)
	}
	for i, e := range a.Knowledge {
		ss.Knowledge[i] = runproto.SessionEntry(e)
	}
	skills, err := s.Skills.ForRun(ctx, r.ProjectID, r.Skills)
	if err != nil {
		return runproto.Session{}, fmt.Errorf("read the skills of run %s: %w", r.ID, err)
	}
	for _, sk := range skills {
		ss.Skills = append(ss.Skills, runproto.SessionSkill{Name: sk.Name, Description: sk.Description, Content: sk.Content})
	}
	proj, err := s.Projects.FindProject(ctx, r.ProjectID)
	if err != nil {
		return runproto.Session{}, fmt.Errorf("read the project of run %s: %w", r.ID, err)
	}
	repo := proj.Repository
	if repo.URL == "" {
		return ss, nil
	}
	ss.Repository = &runproto.SessionRepo{Forge: repo.Forge, URL: repo.URL, DefaultBranch: repo.DefaultBranch, Branch: Branch(a.Ticket.Key)}
	if repo.CredentialsRef == "" || !(strings.HasPrefix(repo.URL, "https://") || strings.HasPrefix(repo.URL, "http://")) {
		return ss, nil // git's own credentials (ssh, a local path)
	}
	if ss.Credential, err = s.credential(ctx, proj); err != nil {
		return runproto.Session{}, err
	}
	return ss, nil
}

// credential is the repository credential a session of proj gets: its
// credentials_ref resolved for the project's organization, or
// run.ErrUnrunnable naming the field when the policy refuses it or it
// names nothing (no run can change that; nothing is sent).
func (s *Sessions) credential(ctx context.Context, proj tenancy.Project) (*runproto.Credential, error) {
	org, err := s.Projects.FindOrganization(ctx, proj.OrganizationID)
	if err != nil {
		return nil, fmt.Errorf("read the organization of project %s: %w", proj.Key, err)
	}
	user, pass, err := forge.ResolveCredentials(org.Slug, proj.Repository.CredentialsRef, s.Secrets)
	if errors.Is(err, forge.ErrCredentialMissing) || errors.Is(err, secret.ErrRefused) {
		return nil, fmt.Errorf("%w: %v", run.ErrUnrunnable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("project %s credentials: %w", proj.Key, err)
	}
	return &runproto.Credential{Username: user, Secret: pass}, nil
}
