package run_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
)

// The runner reads Core's answers that are Core's entities (a lease, a
// run, a runner, a runner's heartbeat) through views of its own in
// runproto, which must not import Core. Every field of a view must be a
// field of Core's answer with the same JSON name and type, so that a
// renamed or retyped field of Core's breaks this test, not the runner.
func TestRunnerViewsReadCoresAnswers(t *testing.T) {
	for _, c := range []struct{ view, core reflect.Type }{
		{reflect.TypeFor[runproto.Lease](), reflect.TypeFor[run.Leased]()},
		{reflect.TypeFor[runproto.Run](), reflect.TypeFor[run.Run]()},
		{reflect.TypeFor[runproto.Runner](), reflect.TypeFor[run.Runner]()},
		{reflect.TypeFor[runproto.HeartbeatAnswer](), reflect.TypeFor[run.RunnerBeat]()},
	} {
		sameFields(t, c.view.Name(), c.view, c.core)
	}
}

// sameFields checks that every JSON field of view is one of core's, of the
// same type, or of a struct type whose fields are core's in turn.
func sameFields(t *testing.T, path string, view, core reflect.Type) {
	t.Helper()
	coreFields := jsonFields(core)
	for name, vt := range jsonFields(view) {
		ct, ok := coreFields[name]
		switch {
		case !ok:
			t.Errorf("%s.%s: Core's %v has no field %q", path, name, core, name)
		case vt == ct:
		case vt.Kind() == reflect.Struct && ct.Kind() == reflect.Struct:
			sameFields(t, path+"."+name, vt, ct)
		default:
			t.Errorf("%s.%s is %v, Core's is %v", path, name, vt, ct)
		}
	}
}

// jsonFields returns t's JSON fields by name, those of embedded structs
// flattened (a field of t shadows an embedded one).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			embedded = append(embedded, f.Type)
		case name == "-" || !f.IsExported():
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	for _, e := range embedded {
		for name, ft := range jsonFields(e) {
			if _, shadowed := out[name]; !shadowed {
				out[name] = ft
			}
		}
	}
	return out
}
