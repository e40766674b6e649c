// Package engine opens the storage engine a [storage] section configures:
// the one place that picks SQLite or rqlite, for every stateful service
// (Core, the Knowledge service), each on its own database.
package engine

import (
	"context"
	"fmt"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
)

// Open opens the configured store (not migrated: each service applies its
// own set).
func Open(ctx context.Context, cfg config.Storage) (store.Store, error) {
	switch cfg.Engine {
	case "rqlite":
		s, err := rqlite.Open(ctx, rqlite.Options{URLs: cfg.URLs(), Username: cfg.Username, Password: cfg.Password, Consistency: cfg.ReadConsistency})
		if err != nil {
			return nil, fmt.Errorf("open rqlite at %s: %w", cfg.URL, err)
		}
		return s, nil
	default:
		s, err := sqlite.Open(ctx, cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("open sqlite database %s: %w", cfg.Path, err)
		}
		return s, nil
	}
}
