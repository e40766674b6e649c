package forge_test

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge"
)

func TestAdopt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pr := func(n int, open, merged bool, head, body string, age int) forge.Found {
		return forge.Found{PullRequest: forge.PullRequest{Number: n, HeadSHA: head}, Open: open, Merged: merged, Body: body, CreatedAt: t0.Add(time.Duration(age) * time.Hour)}
	}
	marked := forge.Marker("ACME-1", "f1")
	for _, c := range []struct {
		name  string
		found []forge.Found
		head  string
		want  int // 0: open a new one
	}{
		{"none", nil, "h2", 0},
		{"an open one by hand", []forge.Found{pr(3, true, false, "h2", "by hand", 1)}, "h2", 3},
		{"open, even on an older head (a push since)", []forge.Found{pr(3, true, false, "h1", marked, 1)}, "h2", 3},
		{"the marked open one first", []forge.Found{pr(3, true, false, "h2", "by hand", 2), pr(4, true, false, "h2", marked, 1)}, "h2", 4},
		{"the newest open one", []forge.Found{pr(3, true, false, "h2", "", 1), pr(4, true, false, "h2", "", 2)}, "h2", 4},
		{"the newest open one, though its number is lower", []forge.Found{pr(4, true, false, "h2", "", 1), pr(3, true, false, "h2", "", 2)}, "h2", 3},
		{"opened at the same time: the higher number", []forge.Found{pr(3, true, false, "h2", "", 1), pr(4, true, false, "h2", "", 1), pr(2, true, false, "h2", "", 1)}, "h2", 4},
		{"merged at this head: adopted, not opened again", []forge.Found{pr(5, false, true, "h2", marked, 1)}, "h2", 5},
		{"closed at this head: adopted (a person closed it)", []forge.Found{pr(5, false, false, "h2", "", 1)}, "h2", 5},
		{"merged at an older head: history", []forge.Found{pr(5, false, true, "h1", marked, 1)}, "h2", 0},
		{"closed at an older head: history", []forge.Found{pr(5, false, false, "h1", marked, 1)}, "h2", 0},
		{"open beats merged at this head", []forge.Found{pr(5, false, true, "h2", marked, 2), pr(6, true, false, "h2", "", 1)}, "h2", 6},
		{"unknown head adopts no closed one", []forge.Found{pr(5, false, false, "", "", 1)}, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := forge.Adopt(c.found, c.head)
			if (c.want != 0) != ok || got.Number != c.want {
				t.Fatalf("Adopt = #%d, %v; want #%d", got.Number, ok, c.want)
			}
		})
	}
}

func TestMarker(t *testing.T) {
	m := forge.Marker("ACME-12", "0190c7a0-flow")
	body := "## Acceptance criteria\n- works\n\n" + m + "\n"
	if !forge.HasMarker(body) || forge.HasMarker("<!-- ballet -->") {
		t.Fatal("HasMarker")
	}
	tk, fl, ok := forge.ParseMarker(body)
	if !ok || tk != "ACME-12" || fl != "0190c7a0-flow" {
		t.Fatalf("ParseMarker = %q %q %v", tk, fl, ok)
	}
	if tk, fl, ok := forge.ParseMarker("opened by hand"); ok || tk != "" || fl != "" {
		t.Fatalf("ParseMarker of a body without a marker = %q %q %v", tk, fl, ok)
	}
}
