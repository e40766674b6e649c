package run

import "github.com/ballet/ballet/internal/store"

// AppendChunk is the guarded insert of data at start into runID's log.
func AppendChunk(runID string, start int64, data []byte) store.Statement {
	return appendChunk(runID, logChunk{start: start, data: data})
}

// UndrainedGuard is the lease batch's guard that its runner is not drained.
var UndrainedGuard = undrainedGuard
