package flow

import (
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// The hooks through which other packages' changes reach the flow engine,
// as jobs in the same batch as their change.

// TrackerHooks are the tracker hooks through which answers and people's
// pauses reach the flow engine, as jobs in the same batch as their change.
func (s *Service) TrackerHooks() tracker.Hooks {
	return tracker.Hooks{
		StateChanged: func(it tracker.Item, from, to string) []job.Spec {
			if to != "paused" && to != "cancelled" {
				return nil
			}
			return []job.Spec{{Kind: JobStop, Payload: map[string]any{"item_id": it.ID}, DedupeKey: "flow-stop:" + it.ID}}
		},
		LastBlockingAnswered: func(itemID string) []job.Spec {
			return []job.Spec{{Kind: JobResume, Payload: map[string]any{"item_id": itemID}, DedupeKey: "flow-resume:" + itemID}}
		},
	}
}

// TenancyHooks are the tenancy hooks through which pauses and budgets
// reach the flow engine, as jobs in the same batch as their change.
func (s *Service) TenancyHooks() tenancy.Hooks {
	var h tenancy.Hooks
	h.ProjectChanged = func(p tenancy.Project, changes tenancy.ProjectChanges) []job.Spec {
		if (changes.Paused != nil && !p.Paused) || changes.Budgets != nil {
			return []job.Spec{{Kind: JobRelease, Payload: map[string]any{"project_id": p.ID}, DedupeKey: "flow-release:" + p.ID}}
		}
		return nil
	}
	h.PlatformPaused = func(paused bool) []job.Spec {
		if paused {
			return []job.Spec{{Kind: JobKill, DedupeKey: "flow-kill"}}
		}
		return []job.Spec{{Kind: JobRelease, Payload: map[string]any{"project_id": ""}, DedupeKey: "flow-release:"}}
	}
	return h
}
