package event

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Payload is the data of one event type. Every event type has a Go type of
// its own, declared by the package that owns the entity, whose EventType
// names it: "<entity>.<change>". Owners export the list of theirs (Types);
// the catalogue of every type is gathered from those lists.
type Payload interface{ EventType() string }

// TypeOf is the event type whose payload is P.
func TypeOf[P Payload]() string {
	var zero P
	return zero.EventType()
}

// EntityOf is the entity type of the events whose payload is P: the part
// of its event type before the dot ("runner" for runner.registered).
func EntityOf[P Payload]() string {
	entity, _, _ := strings.Cut(TypeOf[P](), ".")
	return entity
}

// Of builds the event of a change to an entity: its type is the payload's,
// its entity type the part of that type before the dot, its actor the one
// given. The event gets its id and time when it is applied.
func Of(actor Actor, orgID, projectID, entityID string, p Payload) Event {
	typ := p.EventType()
	entity, _, _ := strings.Cut(typ, ".")
	e := Event{OrganizationID: orgID, ProjectID: projectID, EntityType: entity, EntityID: entityID,
		Type: typ, Payload: MustPayload(p)}
	e.SetActor(actor)
	return e
}

// Decode reads e's payload as a P. ok is false, with no error, when e is of
// another type.
func Decode[P Payload](e Event) (p P, ok bool, err error) {
	if e.Type != TypeOf[P]() {
		return p, false, nil
	}
	if len(e.Payload) > 0 {
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return p, false, fmt.Errorf("event %s (seq %d): payload: %w", e.Type, e.Seq, err)
		}
	}
	return p, true, nil
}

// Catalogue is every event type with the zero value of its payload type.
type Catalogue map[string]Payload

// NewCatalogue gathers the owners' lists of payload types. A type listed
// twice, or one that is not <entity>.<change>, is a programming error and
// panics.
func NewCatalogue(lists ...[]Payload) Catalogue {
	c := Catalogue{}
	for _, list := range lists {
		for _, p := range list {
			typ := p.EventType()
			if entity, change, ok := strings.Cut(typ, "."); !ok || entity == "" || change == "" {
				panic(fmt.Sprintf("event payload %T: type %q is not <entity>.<change>", p, typ))
			}
			if prev, dup := c[typ]; dup {
				panic(fmt.Sprintf("event type %s is listed twice (%T and %T)", typ, prev, p))
			}
			c[typ] = p
		}
	}
	return c
}

// Types lists the catalogue's event types in order.
func (c Catalogue) Types() []string {
	out := make([]string, 0, len(c))
	for t := range c {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Decode reads e's payload as a value of its type's payload type. An event
// whose type the catalogue does not hold is an error.
func (c Catalogue) Decode(e Event) (Payload, error) {
	zero, ok := c[e.Type]
	if !ok {
		return nil, fmt.Errorf("event %s (seq %d): not in the catalogue", e.Type, e.Seq)
	}
	v := reflect.New(reflect.TypeOf(zero))
	if len(e.Payload) > 0 {
		if err := json.Unmarshal(e.Payload, v.Interface()); err != nil {
			return nil, fmt.Errorf("event %s (seq %d): payload: %w", e.Type, e.Seq, err)
		}
	}
	return v.Elem().Interface().(Payload), nil
}
