package apitest_test

import (
	"fmt"
	"testing"

	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// BenchmarkNeedsMe: GET /needs-me (its first 100 entries) and a board
// page (200 items with their flows) for a viewer, over 2,000 tickets with
// an open blocking question each, on SQLite.
func BenchmarkNeedsMe(b *testing.B) {
	s := storetest.Open(b, "sqlite")
	e := apitest.New(b, s)
	org := e.Org("acme")
	e.Project("acme", "ACME")
	for i := range 2000 {
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": fmt.Sprintf("t%d", i)}).JSON(b, &it)
		e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which one?", "blocking": true})
	}
	viewer := e.RoleToken(org, "viewer")
	for _, path := range []string{"/api/v1/needs-me", "/api/v1/projects/ACME/items?limit=200"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				e.Must(200, viewer, "GET", path, nil)
			}
		})
	}
}
