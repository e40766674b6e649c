package tracker

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// graphVersion reads an organization's blocker graph version (0: none
// recorded yet).
func (s *Service) graphVersion(ctx context.Context, orgID string) (int64, error) {
	rows, err := s.Store.Query(ctx, `SELECT COALESCE((SELECT version FROM graph_versions WHERE organization_id = ?), 0)`, orgID)
	if err != nil {
		return 0, fmt.Errorf("read graph version: %w", err)
	}
	var v int64
	return v, rows.Scan(0, &v)
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

// blockerReads is what a change of "item is blocked by blocker" decides
// on, read in this order: the graph version before the graph, so that the
// change's bump of it makes a change decided on an older graph lose its
// race.
type blockerReads struct {
	it, bl       Item
	blockerRef   string // how the caller named bl
	graphVersion int64
	exists       bool     // it is blocked by bl already
	cycle        []string // keys of a chain bl → … → it, each blocked by the next (adding only)
}

// readBlocker reads what a change of "itemRef is blocked by blockerRef"
// needs; adding also reads whether it would close a cycle.
func (s *Service) readBlocker(ctx context.Context, itemRef, blockerRef string, adding bool) (blockerReads, error) {
	rd := blockerReads{blockerRef: blockerRef}
	var err error
	if rd.it, err = s.FindItem(ctx, itemRef); err != nil {
		return rd, err
	}
	if rd.bl, err = s.FindItem(ctx, blockerRef); err != nil {
		return rd, err
	}
	if adding && checkBlocker(rd.it, rd.bl, blockerRef) != nil {
		return rd, nil // refused whatever the graph holds
	}
	if rd.graphVersion, err = s.graphVersion(ctx, rd.it.OrganizationID); err != nil {
		return rd, err
	}
	if rd.exists, err = s.hasBlocker(ctx, rd.it.ID, rd.bl.ID); err != nil || rd.exists || !adding {
		return rd, err
	}
	// Adding "it is blocked by bl" closes a cycle when bl is already
	// (transitively) blocked by it.
	path, err := s.blockerPath(ctx, rd.bl.ID, rd.it.ID)
	if err != nil || path == nil {
		return rd, err
	}
	names, err := s.itemKeys(ctx, path)
	if err != nil {
		return rd, err
	}
	for _, id := range path {
		rd.cycle = append(rd.cycle, names[id])
	}
	return rd, nil
}

// checkBlocker refuses a blocker from another organization (as not found)
// and an item blocking itself.
func checkBlocker(it, bl Item, blockerRef string) error {
	if bl.OrganizationID != it.OrganizationID {
		return apperr.New(apperr.NotFound, "item %q not found", blockerRef)
	}
	if bl.ID == it.ID {
		return apperr.New(apperr.Unprocessable, "%s cannot block itself", it.Key)
	}
	return nil
}

// AddBlocker records that item is blocked by blocker (both in the same
// organization). It reports false, writing nothing, when that was already
// so. A self-block or an addition that would close a cycle is refused as
// unprocessable, naming the cycle.
func (s *Service) AddBlocker(ctx context.Context, actor event.Actor, itemID, blockerID string) (bool, error) {
	added := false
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rd, err := s.readBlocker(ctx, itemID, blockerID, true)
		if err != nil {
			return nil, err
		}
		t, err := rd.add(actor, s.now())
		added = t != nil
		return t, err
	})
	if err != nil {
		return false, err
	}
	return added, nil
}

// add decides adding the blocker: nil when it is there already.
func (rd blockerReads) add(actor event.Actor, now time.Time) (*transition.Transition, error) {
	it, bl := rd.it, rd.bl
	if err := checkBlocker(it, bl, rd.blockerRef); err != nil {
		return nil, err
	}
	if rd.exists {
		return nil, nil
	}
	if rd.cycle != nil {
		return nil, apperr.New(apperr.Unprocessable, "%s cannot be blocked by %s: that would close the cycle %s (each blocked by the next)",
			it.Key, bl.Key, strings.Join(append([]string{it.Key}, rd.cycle...), " → "))
	}
	payload := BlockerChanged{Blocker: bl.Key, BlockerID: bl.ID}
	return &transition.Transition{
		Events:     []event.Event{event.Of(actor, it.OrganizationID, it.ProjectID, it.ID, blockerPayload(it.IsEpic(), true, payload))},
		Guarded:    []store.Statement{bumpGraphVersion(it.OrganizationID, rd.graphVersion)},
		Statements: []store.Statement{store.Stmt(`INSERT INTO blockers (item_id, blocker_id, created_at) VALUES (?, ?, ?)`, it.ID, bl.ID, now.UnixMilli())},
	}, nil
}

// RemoveBlocker removes "item is blocked by blocker"; NotFound when it was
// not so.
func (s *Service) RemoveBlocker(ctx context.Context, actor event.Actor, itemID, blockerID string) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		rd, err := s.readBlocker(ctx, itemID, blockerID, false)
		if err != nil {
			return nil, err
		}
		return rd.remove(actor)
	})
	return err
}

// remove decides removing the blocker.
func (rd blockerReads) remove(actor event.Actor) (*transition.Transition, error) {
	it, bl := rd.it, rd.bl
	if !rd.exists {
		return nil, apperr.New(apperr.NotFound, "%s is not blocked by %s", it.Key, bl.Key)
	}
	payload := BlockerChanged{Blocker: bl.Key, BlockerID: bl.ID}
	return &transition.Transition{
		Events: []event.Event{event.Of(actor, it.OrganizationID, it.ProjectID, it.ID, blockerPayload(it.IsEpic(), false, payload))},
		Guarded: []store.Statement{bumpGraphVersion(it.OrganizationID, rd.graphVersion),
			store.Stmt(`DELETE FROM blockers WHERE item_id = ? AND blocker_id = ?`, it.ID, bl.ID)},
	}, nil
}
