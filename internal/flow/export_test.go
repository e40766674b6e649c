package flow

// AttentionQuery is the query of NeedingAttention, for the test that
// checks its plan.
const AttentionQuery = `SELECT ` + attendedColumns + ` FROM flows WHERE ` + noRunnerSQL

// MergePoll is mergePoll, for its table test.
var MergePoll = mergePoll
