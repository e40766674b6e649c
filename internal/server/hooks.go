package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/tenancy"
)

// PermWebhook is the route table's kind for a forge's webhook: no bearer
// credential, no role; the delivery's signature with the project's webhook
// secret is its credential, which the handler checks.
const PermWebhook access.Permission = "webhook"

// MaxHookBody bounds a webhook delivery's body (413 above).
const MaxHookBody = 1 << 20

// Hooks serves forge webhooks: a delivery about a pull request, a review or
// a check wakes the merge checks of the project's flows waiting for that
// pull request. It changes nothing but those jobs' run time.
type Hooks struct {
	Projects interface {
		FindProject(ctx context.Context, ref string) (tenancy.Project, error)
		FindOrganization(ctx context.Context, ref string) (tenancy.Organization, error)
	}
	// MergeChecks lists the dedupe keys of the merge checks a delivery
	// concerns (flow.Service.MergeChecks).
	MergeChecks func(ctx context.Context, projectID string, h forge.Hook) ([]string, error)
	// Wake makes those jobs due now (job.Orchestrator.Wake).
	Wake func(ctx context.Context, keys ...string) (int, error)
	// Secrets resolves the projects' webhook_secret_ref under the
	// platform's policy (nil: none resolves, every delivery is refused).
	Secrets    forge.Secrets
	Log        *slog.Logger
	Deliveries *prometheus.CounterVec // forge, result: woke, ignored, refused; nil: not counted
}

// NewHookMetrics registers ballet_webhook_deliveries_total.
func NewHookMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ballet_webhook_deliveries_total",
		Help: "Forge webhook deliveries by forge and result (woke: a merge check was made due now; ignored: nothing waited for it; refused: 4xx)."},
		[]string{"forge", "result"})
	reg.MustRegister(c)
	return c
}

// hookAnswer is a delivery's answer without a body: 202 when it woke a
// merge check, 204 when nothing waited for it.
type hookAnswer int

// HTTPStatus is the answer's status.
func (a hookAnswer) HTTPStatus() int { return int(a) }

// Routes returns the webhook endpoint.
func (h *Hooks) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/hooks/{forge}/{project}", Perm: PermWebhook,
			Summary: "A Gitea or GitHub webhook delivery for a project (key or id), signed with its repository.webhook_secret_ref: " +
				"202 when it woke a merge check, 204 otherwise",
			RawBody: "application/json", MaxBody: MaxHookBody, Status: http.StatusAccepted, Also: []int{http.StatusNoContent},
			Handle: h.deliver},
	}
}

// deliver checks a delivery's signature and wakes the merge checks it
// concerns. An unknown project, one without webhooks and a wrong signature
// get the same 401, so that a delivery tells nothing about projects it
// cannot sign for.
func (h *Hooks) deliver(r *Request) (out any, err error) {
	kind, ref := r.PathValue("forge"), r.PathValue("project")
	defer func() { h.count(kind, out, err) }()
	if kind != forge.KindGitea && kind != forge.KindGitHub {
		r.Checked()
		return nil, apperr.New(apperr.NotFound, "no webhooks for the forge %q: the path names gitea or github", kind)
	}
	sigHeader := forge.SignatureHeader(kind)
	sig := r.Header.Get(sigHeader)
	if sig == "" {
		r.Checked()
		return nil, apperr.New(apperr.Unauthenticated, "the delivery is not signed: %s is missing", sigHeader)
	}
	body, err := r.Raw()
	if err != nil {
		r.Checked()
		return nil, err
	}
	refused := apperr.New(apperr.Unauthenticated,
		"the delivery's %s does not match the webhook secret of project %q (or webhooks are not configured for it)", sigHeader, ref)
	p, err := h.Projects.FindProject(r.Context(), ref)
	r.Checked() // the signature decides from here
	switch {
	case apperr.Code(err) == apperr.NotFound:
		return nil, refused
	case err != nil:
		return nil, err
	case p.Repository == nil || p.Repository.WebhookSecretRef == "":
		return nil, refused
	}
	org, err := h.Projects.FindOrganization(r.Context(), p.OrganizationID)
	if err != nil {
		return nil, err
	}
	secret, err := forge.ResolveSecret(org.Slug, p.Repository.WebhookSecretRef, h.Secrets)
	if err != nil {
		h.Log.Warn("a webhook delivery was refused: the project's webhook secret cannot be read", "project", p.Key, "err", err)
		return nil, refused
	}
	if !forge.VerifySignature(kind, sig, body, secret) {
		return nil, refused
	}
	if p.Repository.Forge != kind {
		return nil, apperr.New(apperr.NotFound, "project %s's repository is on %s, not %s: deliver to /api/v1/hooks/%s/%s",
			p.Key, p.Repository.Forge, kind, p.Repository.Forge, p.Key)
	}
	event := r.Header.Get(forge.EventHeader(kind))
	if !forge.Relevant(kind, event) { // GitHub's ping included
		return hookAnswer(http.StatusNoContent), nil
	}
	hook, err := forge.ParseHook(kind, event, body)
	if err != nil {
		return nil, apperr.New(apperr.Invalid, "%v", err)
	}
	keys, err := h.MergeChecks(r.Context(), p.ID, hook)
	if err != nil {
		return nil, err
	}
	n, err := h.Wake(r.Context(), keys...)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return hookAnswer(http.StatusNoContent), nil
	}
	return nil, nil // 202
}

// count records a delivery's result.
func (h *Hooks) count(kind string, out any, err error) {
	if h.Deliveries == nil || (kind != forge.KindGitea && kind != forge.KindGitHub) {
		return
	}
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae):
		h.Deliveries.WithLabelValues(kind, "refused").Inc()
	case err != nil:
	case out == nil:
		h.Deliveries.WithLabelValues(kind, "woke").Inc()
	default:
		h.Deliveries.WithLabelValues(kind, "ignored").Inc()
	}
}
