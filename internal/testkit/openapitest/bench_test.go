package openapitest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/openapitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// BenchmarkCheck measures what checking costs the API tests: one answer
// (an item; a page of 20 events, each against the Event oneOf) and one
// event against its type's schema.
func BenchmarkCheck(b *testing.B) {
	e := apitest.New(b, storetest.Open(b, "sqlite"))
	d, err := openapitest.Served(e.Core.Handler())
	if err != nil {
		b.Fatal(err)
	}
	e.Org("acme")
	e.Project("acme", "ACME")
	for range 10 {
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t"})
	}
	h := http.Header{"Content-Type": {"application/json"}}
	item := e.Admin(200, "GET", "/api/v1/items/ACME-1", nil).Body
	page := e.Admin(200, "GET", "/api/v1/projects/ACME/events?limit=20", nil).Body
	var events struct{ Events []jsonRaw }
	e.Admin(200, "GET", "/api/v1/projects/ACME/events?limit=1", nil).JSON(b, &events)
	b.Run("item", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/api/v1/items/ACME-1", nil)
		for b.Loop() {
			if err := d.Response(r, 200, h, item); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("events-page-20", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/api/v1/projects/ACME/events", nil)
		for b.Loop() {
			if err := d.Response(r, 200, h, page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event", func(b *testing.B) {
		for b.Loop() {
			if err := d.Event(events.Events[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type jsonRaw []byte

func (j *jsonRaw) UnmarshalJSON(b []byte) error { *j = append((*j)[:0], b...); return nil }
