package schedule

import (
	"context"
	"fmt"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/budget"
)

// Hold is one reason a ready ticket does not start now, or would wait once
// started: what GET /items/{item} answers in start, so that a person sees
// why before pressing Start now (and the browser guesses nothing).
type Hold struct {
	Code    string `json:"code"` // one of Holds
	Message string `json:"message"`
}

// Hold codes.
const (
	// HoldBlocked: an open item blocks the ticket or its epic; a start is
	// refused (409) until each is done or cancelled.
	HoldBlocked = "blocked"
	// HoldNoRepository: the project has no repository: the scheduler
	// starts nothing there, and agents would have nothing to work on.
	HoldNoRepository = "no_repository"
	// HoldProjectPaused, HoldPlatformPaused: a flow started now waits for
	// the pause to end; the scheduler starts nothing.
	HoldProjectPaused  = "project_paused"
	HoldPlatformPaused = "platform_paused"
	// HoldProjectLimit, HoldPlatformLimit: every slot of the concurrency
	// limit is taken: the scheduler starts it when one frees (Start now
	// starts it anyway).
	HoldProjectLimit  = "project_limit"
	HoldPlatformLimit = "platform_limit"
	// HoldTicketBudget, HoldDayBudget: the ticket's or the project's daily
	// budget is used up: its first agent stage would wait (for a person to
	// raise the budget, or for tomorrow).
	HoldTicketBudget = "ticket_budget"
	HoldDayBudget    = "day_budget"
)

// Holds lists every hold code.
var Holds = []string{HoldBlocked, HoldNoRepository, HoldProjectPaused, HoldPlatformPaused, HoldProjectLimit, HoldPlatformLimit,
	HoldTicketBudget, HoldDayBudget}

// BudgetGate tells whether a ticket's agent stage may start within its
// project's budgets (flow.Service.BudgetVerdict).
type BudgetGate func(ctx context.Context, projectID, itemID string) (budget.Verdict, error)

// holdState is what Holds reads of a ticket, its project and the platform.
type holdState struct {
	startable      bool     // a ready ticket (not an epic) without an active flow
	blockers       []string // the open items blocking it or its epic: "ACME-1 (backlog)"
	project        string   // the project's key
	repository     bool
	projectPaused  bool
	projectLimit   int
	projectRunning int
	platformPaused bool
	platformLimit  int // the effective limit (0: none)
	running        int // running flows on the platform
}

// holdSQL reads a ticket's hold state in one query (schedule's read model:
// items, blockers, projects, flows, platform).
const holdSQL = `SELECT i.state = 'ready' AND i.type <> 'epic'
      AND NOT EXISTS (SELECT 1 FROM flows f WHERE f.item_id = i.id AND f.status IN ('running', 'waiting')),
    COALESCE((SELECT group_concat(bi.key || ' (' || bi.state || ')', ',') FROM blockers x JOIN items bi ON bi.id = x.blocker_id
        WHERE (x.item_id = i.id OR x.item_id = i.epic_id) AND bi.state NOT IN ('done', 'cancelled')), ''),
    p.id, p.key, COALESCE(p.repo_forge, '') <> '', p.paused, p.concurrency_limit,
    (SELECT COUNT(*) FROM flows f WHERE f.project_id = p.id AND f.status = 'running'),
    pl.paused, pl.concurrency_limit, (SELECT COUNT(*) FROM flows WHERE status = 'running')
FROM items i JOIN projects p ON p.id = i.project_id, platform pl
WHERE i.id = ? AND pl.id = 1`

// Holds returns why the ticket itemID does not start now, or would wait
// once started (nil when nothing holds it, and for an item that is not a
// ready ticket without an active flow). gate, when not nil, adds the
// budgets' verdict.
func (s *Scheduler) Holds(ctx context.Context, itemID string, gate BudgetGate) ([]Hold, error) {
	rows, err := s.store.Query(ctx, holdSQL, itemID)
	if err != nil {
		return nil, fmt.Errorf("read the holds of %s: %w", itemID, err)
	}
	if rows.Len() == 0 {
		return nil, apperr.New(apperr.NotFound, "item %q not found", itemID)
	}
	var st holdState
	var blockers string
	var projectID string
	if err := rows.Scan(0, &st.startable, &blockers, &projectID, &st.project, &st.repository, &st.projectPaused, &st.projectLimit, &st.projectRunning,
		&st.platformPaused, &st.platformLimit, &st.running); err != nil {
		return nil, fmt.Errorf("scan the holds of %s: %w", itemID, err)
	}
	if blockers != "" {
		st.blockers = strings.Split(blockers, ",")
	}
	if st.platformLimit <= 0 {
		st.platformLimit = s.cfg.PlatformLimit
	}
	holds := decideHolds(st)
	if !st.startable || gate == nil {
		return holds, nil
	}
	v, err := gate(ctx, projectID, itemID)
	if err != nil {
		return nil, fmt.Errorf("the budget of %s: %w", itemID, err)
	}
	switch v.Kind {
	case budget.TicketSpent:
		holds = append(holds, Hold{HoldTicketBudget, "Its first agent stage would wait: " + v.Reason + ". Raise the project's ticket budget."})
	case budget.DaySpent:
		holds = append(holds, Hold{HoldDayBudget, "Its first agent stage would wait until tomorrow: " + v.Reason + "."})
	}
	return holds, nil
}

// decideHolds says what holds a ticket in state st (pure).
func decideHolds(st holdState) []Hold {
	if !st.startable {
		return nil
	}
	var out []Hold
	if len(st.blockers) > 0 {
		out = append(out, Hold{HoldBlocked, fmt.Sprintf("Blocked by %s: it can start once each is done or cancelled.", strings.Join(st.blockers, ", "))})
	}
	if !st.repository {
		out = append(out, Hold{HoldNoRepository, fmt.Sprintf("%s has no repository: set one in the project's settings; until then nothing starts on its own and agents have nothing to work on.", st.project)})
	}
	if st.platformPaused {
		out = append(out, Hold{HoldPlatformPaused, "The platform's kill switch is pulled: no stage starts anywhere until it is released."})
	}
	if st.projectPaused {
		out = append(out, Hold{HoldProjectPaused, fmt.Sprintf("%s is paused: a flow started now waits until the project is resumed.", st.project)})
	}
	if st.projectLimit > 0 && st.projectRunning >= st.projectLimit {
		out = append(out, Hold{HoldProjectLimit, fmt.Sprintf("%s runs %d of its %d flows at once: it starts on its own when one finishes (Start now starts it anyway).",
			st.project, st.projectRunning, st.projectLimit)})
	}
	if st.platformLimit > 0 && st.running >= st.platformLimit {
		// How many run is the platform's, across organizations: not told.
		out = append(out, Hold{HoldPlatformLimit, fmt.Sprintf("The platform runs as many flows as its limit (%d) allows: it starts on its own when one finishes (Start now starts it anyway).",
			st.platformLimit)})
	}
	return out
}
