package reconcile

// Queries are the pass's queries with sample arguments, for the test that
// checks their plans (the jobs it reads by key are job.Pending's and
// job.Last's, checked in package job).
var Queries = map[string]struct {
	SQL  string
	Args []any
}{
	"stopped": {stoppedSQL, nil},
	"stalled": {stalledSQL, []any{int64(0)}},
	"steps":   {stepsSQL, stepsArgs},
	"orphans": {orphansSQL, nil},
	"release": {releaseSQL, nil},
}
