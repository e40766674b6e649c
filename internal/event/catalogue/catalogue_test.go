package catalogue_test

import (
	"reflect"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/event/catalogue"
)

// Every type of the catalogue has a payload type of its own: two event
// types sharing one Go type could be told apart only by the string.
func TestEveryTypeHasItsOwnPayloadType(t *testing.T) {
	seen := map[reflect.Type]string{}
	for _, typ := range catalogue.Core.Types() {
		p := catalogue.Core[typ]
		rt := reflect.TypeOf(p)
		if prev, dup := seen[rt]; dup {
			t.Errorf("%s and %s share the payload type %v", prev, typ, rt)
		}
		seen[rt] = typ
		if p.EventType() != typ {
			t.Errorf("%v is listed as %s but names %s", rt, typ, p.EventType())
		}
		e := event.Of(event.System, "o", "", "x", p)
		back, err := catalogue.Core.Decode(e)
		if err != nil || reflect.TypeOf(back) != rt {
			t.Errorf("%s: Decode of its own zero value = %T, %v", typ, back, err)
		}
	}
	if len(seen) < 40 {
		t.Errorf("the catalogue holds %d types; Core writes more", len(seen))
	}
}
