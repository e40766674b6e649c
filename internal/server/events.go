package server

import (
	"sort"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/pipeline/versions"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// EventPayloads is the catalogue of event types: each type with a zero
// value of its payload struct. The OpenAPI document gives every type its
// own schema (EventPayload.<type>) and Event is one of them, told apart by
// type. An event whose type is missing here fails the API tests, which
// check every event they write against the document.
var EventPayloads = map[string]any{
	"organization.created": tenancy.Organization{},
	"project.created":      tenancy.Project{},
	"project.updated":      tenancy.ProjectUpdated{},
	"member.role_set":      tenancy.MemberRoleSet{},
	"member.removed":       tenancy.MemberRemoved{},
	"platform.paused":      tenancy.PlatformSwitched{},
	"platform.resumed":     tenancy.PlatformSwitched{},
	"platform.updated":     tenancy.PlatformUpdated{},
	"pipeline.published":   versions.PipelinePublished{},

	"ticket.created":         tracker.Item{},
	"ticket.updated":         tracker.ItemUpdated{},
	"ticket.state_changed":   tracker.ItemStateChanged{},
	"ticket.blocker_added":   tracker.BlockerChanged{},
	"ticket.blocker_removed": tracker.BlockerChanged{},
	"epic.created":           tracker.Item{},
	"epic.updated":           tracker.ItemUpdated{},
	"epic.state_changed":     tracker.ItemStateChanged{},
	"epic.blocker_added":     tracker.BlockerChanged{},
	"epic.blocker_removed":   tracker.BlockerChanged{},
	"question.asked":         tracker.QuestionAsked{},
	"question.answered":      tracker.QuestionAnswered{},
	"skill.created":          skill.SkillChanged{},
	"skill.updated":          skill.SkillChanged{},
	"skill.deleted":          skill.SkillChanged{},

	"token.created":     auth.Token{},
	"token.revoked":     auth.TokenRevoked{},
	"session.started":   auth.BrowserSession{},
	"session.ended":     auth.SessionEnded{},
	"runner.registered": run.RunnerRegistered{},
	"runner.updated":    run.RunnerUpdated{},

	"run.created":          run.RunCreated{},
	"run.started":          run.RunStarted{},
	"run.reported":         run.RunReported{},
	"run.question_asked":   run.RunQuestionAsked{},
	"run.finished":         run.RunFinished{},
	"run.usage_recorded":   run.RunUsageRecorded{},
	"run.cancelled":        run.RunCancelled{},
	"run.cancel_requested": run.RunCancelRequested{},

	"flow.started":        flow.FlowStarted{},
	"flow.stage_started":  flow.StageStarted{},
	"flow.stage_finished": flow.StageFinished{},
	"flow.done":           flow.StageFinished{},
	"flow.failed":         flow.StageFinished{},
	"flow.waiting":        flow.FlowWaiting{},
	"flow.stuck":          flow.FlowWaiting{},
	"flow.resumed":        flow.FlowResumed{},
	"flow.stopped":        flow.FlowStopped{},
}

// EventTypes lists the catalogue's event types in order.
func EventTypes() []string {
	out := make([]string, 0, len(EventPayloads))
	for t := range EventPayloads {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
