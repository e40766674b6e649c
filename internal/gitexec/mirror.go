package gitexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Mirrors keeps bare mirrors of remote repositories, one per URL under a
// root folder, each behind its own lock: fetching into a mirror and reading
// from it is one holder's at a time within this process. Its zero value is
// ready to use.
type Mirrors struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Open returns the mirror of url under root, created (by git) when missing,
// locked until unlock is called.
func (m *Mirrors) Open(ctx context.Context, git Runner, root, url string) (dir string, unlock func(), err error) {
	sum := sha256.Sum256([]byte(url))
	dir = filepath.Join(root, hex.EncodeToString(sum[:12])+".git")
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*sync.Mutex{}
	}
	l := m.locks[dir]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[dir] = l
	}
	m.mu.Unlock()
	l.Lock()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir, l.Unlock, nil
	}
	if err := create(ctx, git, root, dir); err != nil {
		l.Unlock()
		return "", nil, err
	}
	return dir, l.Unlock, nil
}

// create initialises a bare repository beside dir and renames it into
// place, so that a crash never leaves a half-made mirror.
func create(ctx context.Context, git Runner, root, dir string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("%s: mirrors: %w", git.Prefix, err)
	}
	tmp, err := os.MkdirTemp(root, ".new-")
	if err != nil {
		return fmt.Errorf("%s: mirrors: %w", git.Prefix, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := git.Run(ctx, Cmd{Args: []string{"init", "--bare", "--quiet", "--", tmp}}); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil { // a leftover without HEAD
		return fmt.Errorf("%s: mirrors: %w", git.Prefix, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "HEAD")); serr == nil {
			return nil // another process made it meanwhile
		}
		return fmt.Errorf("%s: mirrors: %w", git.Prefix, err)
	}
	return nil
}
