package reconcile

// Queries are the pass's queries with sample arguments, for the test that
// checks their plans.
var Queries = map[string]struct {
	SQL  string
	Args []any
}{
	"stopped":  {stoppedSQL, nil},
	"stalled":  {stalledSQL, []any{int64(0)}},
	"steps":    {stepsSQL, nil},
	"orphans":  {orphansSQL, nil},
	"release":  {releaseSQL, nil},
	"last job": {lastJobSQL, []any{"flow:x:enter:1"}},
}
