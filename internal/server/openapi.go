package server

import (
	"github.com/ballet/ballet/internal/changes"
	"reflect"

	"github.com/ballet/ballet/internal/digest"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/openapi"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/webhook"
)

// OpenAPI builds the OpenAPI 3.1 document of the route table (package
// openapi). Schemas come from the routes' Request and Response types by
// reflection, named after their Go types; events get one schema per type
// from EventPayloads. It panics on a programming error (two types with one
// name, an enum naming a field that does not exist), which every test that
// starts an API meets. Build it once: it is not cheap.
func (a *API) OpenAPI() map[string]any {
	g := newSchemaGen()
	ops := a.Operations(security)
	paths := g.Paths("/api/v1/", ops)
	g.Schema(eventType) // the realtime API sends events too
	errorSchema(g)
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Ballet Core API", "version": "v1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.Schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"serviceCredential": map[string]any{"type": "http", "scheme": "bearer",
					"description": "the Knowledge service credential ([knowledge] service_token); no user credential"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": "ballet_session",
					"description": "a browser session (POST /api/v1/session); writes must come from Ballet's own origin"},
				"giteaSignature": map[string]any{"type": "apiKey", "in": "header", "name": "X-Gitea-Signature",
					"description": "hex HMAC-SHA256 of the body under the project's repository.webhook_secret_ref"},
				"githubSignature": map[string]any{"type": "apiKey", "in": "header", "name": "X-Hub-Signature-256",
					"description": "sha256= and the hex HMAC-SHA256 of the body under the project's repository.webhook_secret_ref"}},
		},
	}
}

// security is what credential a route of a permission takes.
func security(perm access.Permission) []any {
	switch perm {
	case PermWebhook:
		return []any{map[string]any{"giteaSignature": []any{}}, map[string]any{"githubSignature": []any{}}}
	case PermService:
		return []any{map[string]any{"serviceCredential": []any{}}}
	case PermSignIn:
		return []any{} // the credential is in the body
	}
	return []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}}
}

// newSchemaGen is the schema generator of Core's types: its enums, its
// event catalogue.
func newSchemaGen() *openapi.Generator { return openapi.NewGenerator(enums, EventPayloads) }

var eventType = reflect.TypeFor[event.Event]()

// Closed sets of values, from the constants the code uses.
var (
	roles       = []string{access.Viewer, access.Member, access.Admin}
	tokenKinds  = []string{auth.KindAPI, auth.KindRunner, auth.KindRun}
	actorKinds  = openapi.ActorKinds
	stageKinds  = []string{pipeline.KindAgent, pipeline.KindHuman, pipeline.KindPlatform}
	runStatuses = []string{run.StatusQueued, run.StatusRunning, run.StatusSucceeded, run.StatusFailed, run.StatusCancelled,
		run.StatusInterrupted}
	runReasons = append([]string{""}, runproto.Reasons...)
	errorCodes = door.Codes() // every code writeErr answers

	webhookFormats  = []string{webhook.FormatStandard, webhook.FormatSlack}
	webhookStatuses = []string{webhook.StatusPending, webhook.StatusSucceeded, webhook.StatusFailed, webhook.StatusSkipped}
)

// enums are the closed sets of string fields: by Go type, JSON field name.
// pipeline.Stage has none: parse answers a definition as read, problems
// and all.
var enums = map[reflect.Type]map[string][]string{
	reflect.TypeFor[ErrorDetail]():                {"code": errorCodes},
	reflect.TypeFor[tracker.Item]():               {"state": tracker.States},
	reflect.TypeFor[ItemCreate]():                 {"state": {tracker.StateBacklog, tracker.StateReady}},
	reflect.TypeFor[ItemUpdate]():                 {"state": tracker.States},
	reflect.TypeFor[tracker.ItemStateChanged]():   {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.TicketStateChanged](): {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.EpicStateChanged]():   {"from": tracker.States, "to": tracker.States},
	reflect.TypeFor[tracker.TicketCreated]():      {"state": tracker.States},
	reflect.TypeFor[tracker.EpicCreated]():        {"state": tracker.States},
	reflect.TypeFor[tenancy.Member]():             {"role": roles},
	reflect.TypeFor[MemberSet]():                  {"role": roles},
	reflect.TypeFor[tenancy.MemberRoleSet]():      {"role": roles, "previous_role": roles},
	reflect.TypeFor[tenancy.MemberRemoved]():      {"previous_role": roles},
	reflect.TypeFor[tracker.ActorRef]():           {"kind": actorKinds},
	reflect.TypeFor[auth.Token]():                 {"kind": tokenKinds, "role": append([]string{auth.RolePlatformAdmin}, roles...)},
	reflect.TypeFor[TokenCreate]():                {"kind": tokenKinds},
	reflect.TypeFor[auth.TokenRevoked]():          {"kind": tokenKinds},
	reflect.TypeFor[auth.TokenCreated]():          {"kind": tokenKinds, "role": append([]string{auth.RolePlatformAdmin}, roles...)},
	reflect.TypeFor[StageView]():                  {"kind": stageKinds},
	reflect.TypeFor[run.Run]():                    {"status": runStatuses, "outcome": append([]string{""}, pipeline.Outcomes()...), "reason": runReasons},
	reflect.TypeFor[run.RunFinished]():            {"status": runStatuses, "outcome": append([]string{""}, pipeline.Outcomes()...), "reason": runproto.Reasons},
	reflect.TypeFor[run.RunCancelRequested]():     {"interruption": runproto.Reasons},
	reflect.TypeFor[runproto.FinishIn]():          {"interrupted": runproto.RunnerReasons},
	reflect.TypeFor[run.RunCancelled]():           {"status": runStatuses},
	reflect.TypeFor[run.RunUsageRecorded]():       {"status": runStatuses},
	reflect.TypeFor[ReportIn]():                   {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[run.RunReported]():            {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[FlowView]():                   {"status": flowStatuses, "waiting": flowWaits, "outcome": pipeline.Outcomes(), "attention": flow.Attentions},
	reflect.TypeFor[needsme.Entry]():              {"kind": needsme.Kinds},
	reflect.TypeFor[flow.Summary]():               {"status": flowStatuses, "waiting": append([]string{""}, flowWaits...), "attention": append([]string{""}, flow.Attentions...)},
	reflect.TypeFor[flow.StageStarted]():          {"kind": stageKinds, "waiting": flowWaits},
	reflect.TypeFor[flow.StageFinished]():         {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowWaiting]():           {"waiting": flowWaits, "outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowStuck]():             {"waiting": flowWaits, "outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowDone]():              {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowFailed]():            {"outcome": pipeline.Outcomes()},
	reflect.TypeFor[flow.FlowStopped]():           {"ticket_state": tracker.States},
	reflect.TypeFor[IntrospectOrg]():              {"role": roles},
	reflect.TypeFor[IntrospectAnswer]():           {"kind": {event.ActorHuman, event.ActorService}},
	reflect.TypeFor[digest.DigestNeed]():          {"kind": needsme.TicketKinds},
	reflect.TypeFor[digest.DigestChannel]():       {"kind": needsme.ChannelKinds},
	reflect.TypeFor[digest.DigestFinished]():      {"kind": {digest.FinishedTicket, digest.FinishedMerge}},
	reflect.TypeFor[digest.DigestFailure]():       {"kind": {digest.FailureFailed, digest.FailureStuck}},
	reflect.TypeFor[digest.DigestCreated]():       {"status": {digest.StatusPending, digest.StatusEmpty}},
	reflect.TypeFor[digest.DigestFailed]():        {"status": {digest.StatusSkipped, digest.StatusFailed}},
	reflect.TypeFor[WebhookCreate]():              {"events": webhook.EventNames, "format": webhookFormats},
	reflect.TypeFor[WebhookUpdate]():              {"events": webhook.EventNames, "format": webhookFormats},
	reflect.TypeFor[webhook.Webhook]():            {"events": webhook.EventNames, "format": webhookFormats},
	reflect.TypeFor[webhook.WebhookCreated]():     {"events": webhook.EventNames, "format": webhookFormats},
	reflect.TypeFor[webhook.WebhookDelivery]():    {"status": webhookStatuses, "cause": notify.Causes},
	reflect.TypeFor[webhook.DeliveryAttempted]():  {"status": webhookStatuses},
	reflect.TypeFor[changes.ChangedFile]():        {"status": changes.FileStatuses},
	reflect.TypeFor[changes.BranchPull]():         {"state": changes.PullStates},
	reflect.TypeFor[changes.BranchCheck]():        {"state": changes.CheckStates},
	reflect.TypeFor[changes.BranchReview]():       {"state": changes.ReviewStates},
}

// errorSchema registers Error, the one error body, with its details: field
// problems or pipeline problems.
func errorSchema(g *openapi.Generator) {
	g.Schemas["Error"] = g.Schema(reflect.TypeFor[ErrorBody]())
	detail := g.Schemas["ErrorDetail"].(map[string]any)
	detail["properties"].(map[string]any)["details"] = map[string]any{"type": "array", "items": map[string]any{
		"anyOf": []any{g.Schema(reflect.TypeFor[apperr.FieldError]()), g.Schema(reflect.TypeFor[pipeline.Problem]())}}}
}
