package job

// Reads are the read functions' queries with sample arguments, for the
// test that checks their plans.
var Reads = map[string]struct {
	SQL  string
	Args []any
}{
	"free": {freeSQL, []any{`["flow:x:enter:1","flow-stop:y"]`}},
	"last": {lastSQL, []any{"flow:x:enter:1"}},
}
