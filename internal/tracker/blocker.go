package tracker

import (
	"context"
	"fmt"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Blockers: an item is blocked by other items of its organization. The
// graph stays acyclic: an addition that would close a cycle is refused.
// Every change bumps the organization's row of graph_versions as a guarded
// statement, and the cycle check reads the graph after that version in the
// same attempt, so two concurrent additions cannot close a cycle together:
// the second one loses its race and decides again on the new graph.

// graphVersion reads an organization's blocker graph version and returns
// the guarded statement that bumps it.
func (s *Service) graphVersion(ctx context.Context, orgID string) (store.Statement, error) {
	rows, err := s.Store.Query(ctx, `SELECT COALESCE((SELECT version FROM graph_versions WHERE organization_id = ?), 0)`, orgID)
	if err != nil {
		return store.Statement{}, fmt.Errorf("read graph version: %w", err)
	}
	var v int64
	if err := rows.Scan(0, &v); err != nil {
		return store.Statement{}, err
	}
	return bumpGraphVersion(orgID, v), nil
}

// bumpGraphVersion returns the guarded statement that moves an
// organization's blocker graph version (graph_versions) from v to v+1
// (v = 0: there is no row yet).
func bumpGraphVersion(orgID string, v int64) store.Statement {
	if v == 0 {
		return store.Stmt(`INSERT INTO graph_versions (organization_id, version) VALUES (?, 1) ON CONFLICT DO NOTHING`, orgID)
	}
	return store.Stmt(`UPDATE graph_versions SET version = version + 1 WHERE organization_id = ? AND version = ?`, orgID, v)
}

func (s *Service) hasBlocker(ctx context.Context, itemID, blockerID string) (bool, error) {
	rows, err := s.Store.Query(ctx, `SELECT 1 FROM blockers WHERE item_id = ? AND blocker_id = ?`, itemID, blockerID)
	if err != nil {
		return false, fmt.Errorf("read blocker: %w", err)
	}
	return rows.Len() > 0, nil
}

// blockerPath returns the ids on a chain from → … → to where each is
// blocked by the next, or nil when to is not reachable.
func (s *Service) blockerPath(ctx context.Context, from, to string) ([]string, error) {
	rows, err := s.Store.Query(ctx, `WITH RECURSIVE reach(id) AS (
  SELECT ? UNION SELECT b.blocker_id FROM blockers b JOIN reach r ON b.item_id = r.id
) SELECT b.item_id, b.blocker_id FROM blockers b JOIN reach r ON b.item_id = r.id`, from)
	if err != nil {
		return nil, fmt.Errorf("read blocker graph: %w", err)
	}
	edges := map[string][]string{}
	for i := range rows.Len() {
		var it, bl string
		if err := rows.Scan(i, &it, &bl); err != nil {
			return nil, err
		}
		edges[it] = append(edges[it], bl)
	}
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for n := to; n != ""; n = parent[n] {
				path = append([]string{n}, path...)
			}
			return path, nil
		}
		for _, next := range edges[cur] {
			if _, seen := parent[next]; !seen {
				parent[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return nil, nil
}

// itemKeys maps item ids to their keys.
func (s *Service) itemKeys(ctx context.Context, ids []string) (map[string]string, error) {
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.Store.Query(ctx, `SELECT id, key FROM items WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read item keys: %w", err)
	}
	out := map[string]string{}
	for i := range rows.Len() {
		var id, key string
		if err := rows.Scan(i, &id, &key); err != nil {
			return nil, err
		}
		out[id] = key
	}
	return out, nil
}

// AddBlocker records that item is blocked by blocker (both in the same
// organization). It reports false, writing nothing, when that was already
// so. A self-block or an addition that would close a cycle is refused as
// unprocessable, naming the cycle.
func (s *Service) AddBlocker(ctx context.Context, actor event.Actor, itemID, blockerID string) (bool, error) {
	added := false
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		added = false
		it, err := s.FindItem(ctx, itemID)
		if err != nil {
			return nil, err
		}
		bl, err := s.FindItem(ctx, blockerID)
		if err != nil {
			return nil, err
		}
		if bl.OrganizationID != it.OrganizationID {
			return nil, apperr.New(apperr.NotFound, "item %q not found", blockerID)
		}
		if bl.ID == it.ID {
			return nil, apperr.New(apperr.Unprocessable, "%s cannot block itself", it.Key)
		}
		bump, err := s.graphVersion(ctx, it.OrganizationID) // before reading the graph
		if err != nil {
			return nil, err
		}
		exists, err := s.hasBlocker(ctx, it.ID, bl.ID)
		if err != nil || exists {
			return nil, err
		}
		// Adding "it is blocked by bl" closes a cycle when bl is already
		// (transitively) blocked by it.
		path, err := s.blockerPath(ctx, bl.ID, it.ID)
		if err != nil {
			return nil, err
		}
		if path != nil {
			return nil, s.cycleError(ctx, it, bl, path)
		}
		now := s.now()
		payload := BlockerChanged{Blocker: bl.Key, BlockerID: bl.ID}
		added = true
		return &transition.Transition{
			Events:     []event.Event{event.New(actor, it.OrganizationID, it.ProjectID, it.EntityType(), it.ID, "blocker_added", payload)},
			Guarded:    []store.Statement{bump},
			Statements: []store.Statement{store.Stmt(`INSERT INTO blockers (item_id, blocker_id, created_at) VALUES (?, ?, ?)`, it.ID, bl.ID, now.UnixMilli())},
		}, nil
	})
	if err != nil {
		return false, err
	}
	return added, nil
}

func (s *Service) cycleError(ctx context.Context, it, bl Item, path []string) error {
	names, err := s.itemKeys(ctx, path)
	if err != nil {
		return err
	}
	chain := []string{it.Key}
	for _, id := range path {
		chain = append(chain, names[id])
	}
	return apperr.New(apperr.Unprocessable, "%s cannot be blocked by %s: that would close the cycle %s (each blocked by the next)",
		it.Key, bl.Key, strings.Join(chain, " → "))
}

// RemoveBlocker removes "item is blocked by blocker"; NotFound when it was
// not so.
func (s *Service) RemoveBlocker(ctx context.Context, actor event.Actor, itemID, blockerID string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		it, err := s.FindItem(ctx, itemID)
		if err != nil {
			return nil, err
		}
		bl, err := s.FindItem(ctx, blockerID)
		if err != nil {
			return nil, err
		}
		bump, err := s.graphVersion(ctx, it.OrganizationID)
		if err != nil {
			return nil, err
		}
		exists, err := s.hasBlocker(ctx, it.ID, bl.ID)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, apperr.New(apperr.NotFound, "%s is not blocked by %s", it.Key, bl.Key)
		}
		payload := BlockerChanged{Blocker: bl.Key, BlockerID: bl.ID}
		return &transition.Transition{
			Events: []event.Event{event.New(actor, it.OrganizationID, it.ProjectID, it.EntityType(), it.ID, "blocker_removed", payload)},
			Guarded: []store.Statement{bump,
				store.Stmt(`DELETE FROM blockers WHERE item_id = ? AND blocker_id = ?`, it.ID, bl.ID)},
		}, nil
	})
	return err
}
