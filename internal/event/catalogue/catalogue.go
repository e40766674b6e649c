// Package catalogue is the catalogue of the event types Core writes: each
// type with its payload type, gathered from the lists of the packages that
// own them (tenancy, tracker, flow, run, auth, skill, pipeline versions, notify, digest).
// The OpenAPI document's Event schemas, the event reference's check and
// the tests that hold every written event to its payload type read it; a
// new event type is listed where its payload type is declared, and nowhere
// else.
package catalogue

import (
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/pipeline/versions"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/skill"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/webhook"
)

// Core is every event type Core writes.
var Core = event.NewCatalogue(tenancy.Events, versions.Events, tracker.Events, skill.Events, auth.Events, run.Events, flow.Events, notify.Events,
	digest.Events, webhook.Events)
