package pipeline

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with the file, or rewrites the file with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run %s -update rewrites it)\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// TestParseGolden: testdata/parse/NAME.yaml → the problems, as the API
// returns them, in NAME.json.
func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/parse/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no inputs", err)
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			_, ps := Parse(src)
			if ps == nil {
				ps = []Problem{}
			}
			out, err := json.MarshalIndent(ps, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(in, ".yaml")+".json", append(out, '\n'))
		})
	}
}

// TestRenderGolden: the template and testdata/render/NAME.in.yaml → the
// canonical YAML in NAME.out.yaml, which parses back to the same definition
// and renders to the same bytes.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/render/*.in.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no inputs", err)
	}
	cases := map[string]Definition{"testdata/render/template.out.yaml": Template()}
	for _, in := range files {
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		d, ps := Parse(src)
		if len(ps) > 0 {
			t.Fatalf("%s: %v", in, ps)
		}
		cases[strings.TrimSuffix(in, ".in.yaml")+".out.yaml"] = d
	}
	for out, d := range cases {
		t.Run(filepath.Base(out), func(t *testing.T) {
			got, err := Render(d)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, out, got)
			back, ps := Parse(got)
			if len(ps) > 0 {
				t.Fatalf("rendered YAML has problems: %v", ps)
			}
			if !reflect.DeepEqual(back, d) {
				t.Errorf("round trip\n got %#v\nwant %#v", back, d)
			}
			again, _ := Render(back)
			if !bytes.Equal(again, got) {
				t.Errorf("render is not stable:\n%s\n%s", got, again)
			}
		})
	}
}
