package versions

import (
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/tenancy"
)

// TestDecidePublish: publishing is a pure function of the project, the
// name, the base version and the definition.
func TestDecidePublish(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	alice := event.Actor{Kind: event.ActorHuman, Sub: "alice"}
	p := tenancy.Project{ID: "p1", OrganizationID: "o1", Key: "ACME", TicketTypes: []string{"task", "bug"}}
	broken := pipeline.Template()
	broken.Stages[0].ID = ""
	for _, c := range []struct {
		name  string
		pname string
		base  int64
		def   pipeline.Definition
		field string // the field named in the error ("" for success)
	}{
		{"default", "default", 0, pipeline.Template(), ""},
		{"a ticket type's", "bug", 4, pipeline.Template(), ""},
		{"not a ticket type", "story", 0, pipeline.Template(), "name"},
		{"a negative base", "default", -1, pipeline.Template(), "version"},
		{"an invalid definition", "default", 0, broken, ""},
	} {
		out, tr, err := publish(alice, p, c.pname, c.base, c.def, now)
		switch {
		case c.name == "an invalid definition":
			if apperr.Code(err) != apperr.Invalid || !strings.HasPrefix(err.Error(), "definition: the pipeline has") {
				t.Errorf("%s: %v", c.name, err)
			}
		case c.field != "":
			var ae *apperr.Error
			if ae, _ = err.(*apperr.Error); ae == nil || len(ae.FieldErrors()) != 1 || ae.FieldErrors()[0].Field != c.field {
				t.Errorf("%s: %v, want a problem with %s", c.name, err, c.field)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case out.Version != c.base+1 || out.Project != "ACME" || tr.Events[0].Type != "pipeline.published" || tr.Events[0].EntityID != "p1:"+c.pname:
			t.Errorf("%s: %+v, %+v", c.name, out, tr.Events[0])
		}
	}
}
