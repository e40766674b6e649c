package flow

import (
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// The hooks through which other packages' changes reach the flow engine,
// as jobs in the same batch as their change. They are pure (they name
// flow jobs, nothing more), so the tracker and tenancy receive them at
// construction, before the flow Service that reads them is built.

// TrackerHooks are the tracker hooks through which answers and people's
// pauses reach the flow engine, as jobs in the same batch as their change.
func TrackerHooks() tracker.Hooks {
	return tracker.Hooks{
		StateChanged: func(it tracker.Item, from, to string) []job.Spec {
			if to != "paused" && to != "cancelled" {
				return nil
			}
			return []job.Spec{job.New(StopArgs{ItemID: it.ID})}
		},
		LastBlockingAnswered: func(itemID string) []job.Spec {
			return []job.Spec{job.New(ResumeArgs{ItemID: itemID})}
		},
	}
}

// TenancyHooks are the tenancy hooks through which pauses and budgets
// reach the flow engine, as jobs in the same batch as their change.
func TenancyHooks() tenancy.Hooks {
	var h tenancy.Hooks
	h.ProjectChanged = func(p tenancy.Project, changes tenancy.ProjectChanges) []job.Spec {
		if (changes.Paused != nil && !p.Paused) || changes.Budgets != nil {
			return []job.Spec{job.New(ReleaseArgs{ProjectID: p.ID})}
		}
		return nil
	}
	h.PlatformPaused = func(paused bool) []job.Spec {
		if paused {
			return []job.Spec{job.New(KillArgs{})}
		}
		return []job.Spec{job.New(ReleaseArgs{})} // every project
	}
	return h
}
