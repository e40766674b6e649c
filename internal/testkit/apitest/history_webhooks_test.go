package apitest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/webhook"
)

// writeWebhookEvents writes every webhook.* event: a hook created, updated
// and deleted; another whose receiver fails, so its delivery is queued and
// attempted by the jobs, then given up — its next attempt run on a clock a
// day ahead — which disables the hook.
func writeWebhookEvents(t *testing.T, w *flowWorld) {
	t.Helper()
	ctx := context.Background()
	failing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(failing.Close)
	var gone webhook.CreatedWebhook
	w.Admin(201, "POST", "/api/v1/orgs/acme/webhooks", map[string]any{"url": failing.URL + "/org", "events": []string{"flow.failed"}}).JSON(t, &gone)
	w.Admin(200, "PATCH", "/api/v1/orgs/acme/webhooks/"+gone.ID, map[string]any{"format": "slack"})
	w.Admin(204, "DELETE", "/api/v1/orgs/acme/webhooks/"+gone.ID, nil)
	var h webhook.CreatedWebhook
	w.Admin(201, "POST", "/api/v1/projects/ACME/webhooks", map[string]any{"url": failing.URL, "events": []string{"question.opened"}}).JSON(t, &h)
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "hooked"}).JSON(t, &it)
	w.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Heard?", "blocking": true})
	if _, err := w.Core.Webhooks.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	var d webhook.WebhookDelivery
	hang.WaitFor(t, "the first attempt", func() bool {
		var page webhook.WebhookDeliveries
		w.Admin(200, "GET", "/api/v1/projects/ACME/webhooks/"+h.ID+"/deliveries", nil).JSON(t, &page)
		if len(page.Deliveries) == 0 {
			return false
		}
		d = page.Deliveries[0]
		return d.Attempts == 1
	})
	later := handlers{}
	(&webhook.Deliverer{Store: w.Core.Store, Applier: w.Core.Applier, Clock: clock.NewFake(time.Now().Add(25 * time.Hour)),
		Client: webhook.NewClient(true, nil, time.Second)}).Register(later)
	payload, _ := json.Marshal(webhook.Deliver{Delivery: d.ID, Attempt: 2})
	if err := later[webhook.Deliver{}.Kind()](ctx, &job.Job{Kind: webhook.Deliver{}.Kind(), Payload: payload}); err != nil {
		t.Fatal(err)
	}
	var got webhook.Webhook
	w.Admin(200, "GET", "/api/v1/projects/ACME/webhooks/"+h.ID, nil).JSON(t, &got)
	if got.Active {
		t.Fatalf("the hook is still active after a day of failures: %+v", got)
	}
}
