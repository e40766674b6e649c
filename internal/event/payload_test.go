package event_test

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/event"
)

type widgetMade struct {
	Name string `json:"name"`
}

func (widgetMade) EventType() string { return "widget.made" }

type widgetGone struct{}

func (widgetGone) EventType() string { return "widget.gone" }

type badType struct{}

func (badType) EventType() string { return "nodot" }

func TestOfNamesTheEntityByTheTypesPrefix(t *testing.T) {
	e := event.Of(event.Actor{Kind: event.ActorHuman, Sub: "ann"}, "org1", "prj1", "w1", widgetMade{Name: "cog"})
	if e.Type != "widget.made" || e.EntityType != "widget" || e.EntityID != "w1" || e.OrganizationID != "org1" || e.ProjectID != "prj1" {
		t.Fatalf("event = %+v", e)
	}
	if got := string(e.Payload); got != `{"name":"cog"}` {
		t.Errorf("payload = %s", got)
	}
	if e.ActorKind != event.ActorHuman || e.ActorSub != "ann" {
		t.Errorf("actor = %s/%s", e.ActorKind, e.ActorSub)
	}
}

func TestDecodeReadsOnlyItsType(t *testing.T) {
	e := event.Of(event.Actor{Kind: event.ActorSystem}, "o", "", "w", widgetMade{Name: "cog"})
	p, ok, err := event.Decode[widgetMade](e)
	if err != nil || !ok || p.Name != "cog" {
		t.Fatalf("Decode = %+v, %v, %v", p, ok, err)
	}
	if _, ok, err := event.Decode[widgetGone](e); ok || err != nil {
		t.Errorf("Decode of another type = %v, %v; want false, nil", ok, err)
	}
	e.Payload = []byte(`{"name":7}`)
	if _, _, err := event.Decode[widgetMade](e); err == nil || !strings.Contains(err.Error(), "widget.made") {
		t.Errorf("Decode of a bad payload = %v; want an error naming the type", err)
	}
}

func TestCatalogue(t *testing.T) {
	c := event.NewCatalogue([]event.Payload{widgetMade{}}, []event.Payload{widgetGone{}})
	if got := strings.Join(c.Types(), ","); got != "widget.gone,widget.made" {
		t.Errorf("Types = %s", got)
	}
	p, err := c.Decode(event.Of(event.Actor{Kind: event.ActorSystem}, "o", "", "w", widgetMade{Name: "cog"}))
	if err != nil || p.(widgetMade).Name != "cog" {
		t.Errorf("Decode = %#v, %v", p, err)
	}
	if _, err := c.Decode(event.Event{Type: "widget.sold"}); err == nil {
		t.Error("Decode of a type not in the catalogue succeeded")
	}
	for name, lists := range map[string][][]event.Payload{
		"duplicate": {{widgetMade{}}, {widgetMade{}}},
		"bad name":  {{badType{}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewCatalogue did not panic", name)
				}
			}()
			event.NewCatalogue(lists...)
		}()
	}
}
