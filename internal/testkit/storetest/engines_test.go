package storetest

import (
	"slices"
	"strings"
	"testing"
)

func TestSelected(t *testing.T) {
	for _, c := range []struct {
		env  string
		want []string
		err  string
	}{
		{env: "", want: []string{"sqlite", "rqlite"}},
		{env: "sqlite", want: []string{"sqlite"}},
		{env: " rqlite , sqlite,rqlite", want: []string{"rqlite", "sqlite"}},
		{env: "sqlite,postgres", err: `BALLET_ENGINES="sqlite,postgres": unknown engine "postgres"`},
		{env: "sqlite,", err: `unknown engine ""`},
	} {
		got, err := selected(c.env)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("selected(%q): %v, want error ~%q", c.env, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("selected(%q) = %v, %v; want %v", c.env, got, err, c.want)
		}
	}
}
