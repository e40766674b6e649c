package strictjson

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[jsontext.Pointer]string{
		"":                    "",
		"/title":              "title",
		"/repository/url":     "repository.url",
		"/stages/2/id":        "stages[2].id",
		"/stages/0/skills/11": "stages[0].skills[11]",
		"/labels/a~1b":        "labels.a/b",
		"/labels/x~0y":        "labels.x~y",
	} {
		if got := Path(p); got != want {
			t.Errorf("Path(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	var v struct {
		Stages []struct {
			ID string `json:"id"`
		} `json:"stages"`
	}
	err := Unmarshal([]byte(`{"stages":[{"id":"a"},{"Id":"b"}]}`), &v)
	if err == nil || err.Error() != `stages[1].Id: unknown field (names are case-sensitive: did you mean "id"?)` {
		t.Fatalf("%v", err)
	}
	if err := Unmarshal([]byte(` `), &v); err == nil || err.Error() != "JSON is empty: a JSON object is required" {
		t.Fatalf("%v", err)
	}
	if err := Unmarshal([]byte(`{} x`), &v); err == nil || !err.(*Error).Malformed {
		t.Fatalf("%v", err)
	}
}
