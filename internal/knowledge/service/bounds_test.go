package service_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestNumbersBeyondTheirBounds: the Knowledge service's numbers (docs/api.md
// "Numbers and their bounds") — page sizes, the versions read, diffed,
// saved on and restored — just past either end are a 400 naming the
// field; the ends themselves are not refused as invalid.
func TestNumbersBeyondTheirBounds(t *testing.T) {
	storetest.EachWith(t, knowledge.Migrations, func(t *testing.T, s store.Store) {
		e := newEnv(t, s)
		entry := base + "/spaces/default/entries/a"
		e.must(201, "ann-token", "POST", base+"/spaces/default/entries", map[string]any{"slug": "a", "title": "t", "body": "b"})
		above := bounds.Version.Max + 1
		type row struct {
			method, path string
			body         any
			field        string
		}
		rows := []row{
			{"GET", base + "/spaces/default/entries?limit=0", nil, "limit"},
			{"GET", base + "/spaces/default/entries?limit=1001", nil, "limit"},
			{"GET", base + "/search?q=a&limit=0", nil, "limit"},
			{"GET", fmt.Sprintf("%s/search?q=a&limit=%d", base, knowledge.MaxResults+1), nil, "limit"},
			{"PUT", entry, map[string]any{"version": 0, "title": "t", "body": "c"}, "version"},
			{"PUT", entry, map[string]any{"version": above, "title": "t", "body": "c"}, "version"},
			{"POST", entry + "/restore", map[string]any{"version": 0, "based_on": 1}, "version"},
			{"POST", entry + "/restore", map[string]any{"version": above, "based_on": 1}, "version"},
			{"POST", entry + "/restore", map[string]any{"version": 1, "based_on": 0}, "based_on"},
			{"POST", entry + "/restore", map[string]any{"version": 1, "based_on": above}, "based_on"},
		}
		for _, name := range []string{"version", "from", "to"} {
			path := map[string]string{"version": entry + "?", "from": entry + "/diff?to=1&", "to": entry + "/diff?from=1&"}[name]
			rows = append(rows, row{"GET", fmt.Sprintf("%s%s=0", path, name), nil, name}, row{"GET", fmt.Sprintf("%s%s=%d", path, name, above), nil, name})
		}
		for _, c := range rows {
			code, out := e.do("ann-token", c.method, c.path, c.body)
			if code != 400 || !strings.Contains(detailFields(out), c.field) {
				t.Errorf("%s %s %v: %d %v, want a 400 naming %s", c.method, c.path, c.body, code, out, c.field)
			}
		}
		// The ends.
		for _, path := range []string{base + "/spaces/default/entries?limit=1", base + "/spaces/default/entries?limit=1000",
			base + "/search?q=a&limit=1", fmt.Sprintf("%s/search?q=a&limit=%d", base, knowledge.MaxResults), entry + "?version=1"} {
			e.must(200, "ann-token", "GET", path, nil)
		}
		if code, out := e.do("ann-token", "GET", fmt.Sprintf("%s?version=%d", entry, bounds.Version.Max), nil); code != 404 {
			t.Errorf("the largest version: %d %v, want 404 (no such version)", code, out)
		}
	})
}

// detailFields is every field a 400's details name.
func detailFields(out map[string]any) string {
	b, _ := json.Marshal(out)
	var body struct {
		Error struct{ Details []struct{ Field string } }
	}
	json.Unmarshal(b, &body)
	var fs []string
	for _, d := range body.Error.Details {
		fs = append(fs, d.Field)
	}
	return strings.Join(fs, ",")
}
