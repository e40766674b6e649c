// Package sqlite is the embedded storage engine: SQLite through
// modernc.org/sqlite (pure Go), in WAL mode, with one writer connection and a
// pool of read connections (DESIGN.md "Storage").
//
// Writes are group-committed: batches that arrive while the writer is busy
// are executed together in one SQLite transaction, each inside its own
// SAVEPOINT, so a failing batch rolls back alone and the others commit.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/ballet/ballet/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// maxGroup bounds how many batches one SQLite transaction commits.
const maxGroup = 64

// maxCachedStatements bounds the writer's prepared statement cache.
const maxCachedStatements = 1024

// Store is a SQLite database file.
type Store struct {
	path  string
	lock  *lockFile
	write *sql.DB
	conn  *sql.Conn
	read  *sql.DB
	stmts map[string]*sql.Stmt

	readMu sync.Mutex
	reads  map[string]*sql.Stmt // prepared reads, shared by the pool

	reqs      chan *request
	closing   chan struct{}
	closeOnce sync.Once
	stopped   chan struct{}
}

type request struct {
	ctx   context.Context
	batch []store.Statement
	done  chan response
}

type response struct {
	results []store.Result
	err     error
}

// Open opens (creating it and its folder if needed) the database at path.
// It first takes an exclusive lock on path + ".lock", held until Close: a
// database open in another process, or already open in this one, fails
// with a *LockedError naming the holder's process id.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, true)
}

// OpenShared opens the database without taking its lock, beside a holder:
// for tests and tools that share the file on purpose (SQLite stays
// consistent across processes; what the lock protects is Core's
// assumption that it alone leads on a SQLite file).
func OpenShared(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, false)
}

func open(ctx context.Context, path string, locked bool) (s *Store, err error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fileError("create the database folder", dir, err)
		}
	}
	var lk *lockFile
	if locked {
		if lk, err = lock(path); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			lk.release()
		}
	}()
	// SQLite's own error for a file it may not write is "out of memory"
	// or "readonly database" later: check first, to name the problem.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fileError("open the database", path, err)
	}
	f.Close()
	pragmas := url.Values{}
	// temp_store(MEMORY): group commit's savepoint journals stay in memory
	// instead of spilling to a temporary file (measured +35 % end to end).
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)", "temp_store(2)"} {
		pragmas.Add("_pragma", p)
	}
	w := pragmas
	w.Set("_txlock", "immediate")
	write, err := sql.Open("sqlite", "file:"+path+"?"+w.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	conn, err := write.Conn(ctx)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Make sure WAL is on before readers open the file.
	if _, err := conn.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		conn.Close()
		write.Close()
		return nil, fmt.Errorf("open %s: enable WAL: %w", path, err)
	}
	r := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "foreign_keys(1)", "query_only(1)"} {
		r.Add("_pragma", p)
	}
	read, err := sql.Open("sqlite", "file:"+path+"?"+r.Encode())
	if err != nil {
		conn.Close()
		write.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	s = &Store{
		path: path, lock: lk, write: write, conn: conn, read: read,
		stmts:   map[string]*sql.Stmt{},
		reads:   map[string]*sql.Stmt{},
		reqs:    make(chan *request, maxGroup),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go s.writer()
	return s, nil
}

// Engine returns "sqlite".
func (s *Store) Engine() string { return "sqlite" }

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Exec runs the batch atomically on the writer connection.
func (s *Store) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	r := &request{ctx: ctx, batch: batch, done: make(chan response, 1)}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err() // not submitted: nothing was written
	case <-s.closing:
		return nil, errors.New("sqlite store is closed")
	}
	select {
	case resp := <-r.done:
		return resp.results, resp.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", store.ErrUnknownOutcome, ctx.Err())
	}
}

func (s *Store) writer() {
	defer close(s.stopped)
	group := make([]*request, 0, maxGroup)
	for {
		select {
		case r := <-s.reqs:
			group = append(group[:0], r)
		drain:
			for len(group) < maxGroup {
				select {
				case r := <-s.reqs:
					group = append(group, r)
				default:
					break drain
				}
			}
			s.commit(group)
		case <-s.closing:
			for {
				select {
				case r := <-s.reqs:
					r.done <- response{err: errors.New("sqlite store is closed")}
				default:
					return
				}
			}
		}
	}
}

// commit executes a group of batches in one transaction.
func (s *Store) commit(group []*request) {
	ctx := context.Background()
	live := group[:0:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- response{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if _, err := s.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		for _, r := range live {
			r.done <- response{err: fmt.Errorf("sqlite begin: %w", err)}
		}
		return
	}
	resps := make([]response, len(live))
	single := len(live) == 1
	for i, r := range live {
		if !single {
			if _, err := s.conn.ExecContext(ctx, "SAVEPOINT batch"); err != nil {
				resps[i].err = fmt.Errorf("sqlite savepoint: %w", err)
				continue
			}
		}
		res, err := s.run(ctx, r.batch)
		resps[i] = response{results: res, err: err}
		if single {
			break
		}
		if err != nil {
			if _, rerr := s.conn.ExecContext(ctx, "ROLLBACK TO batch"); rerr != nil {
				s.abort(live, fmt.Errorf("sqlite rollback to savepoint: %w", rerr))
				return
			}
		}
		if _, err := s.conn.ExecContext(ctx, "RELEASE batch"); err != nil {
			s.abort(live, fmt.Errorf("sqlite release savepoint: %w", err))
			return
		}
	}
	if single && resps[0].err != nil {
		// Only the failing statement aborted: roll the rest back ourselves.
		if _, err := s.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			resps[0].err = fmt.Errorf("%w (and rollback failed: %v)", resps[0].err, err)
		}
		live[0].done <- resps[0]
		return
	}
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		s.abort(live, fmt.Errorf("sqlite commit: %w", err))
		return
	}
	for i, r := range live {
		r.done <- resps[i]
	}
}

// abort rolls the whole transaction back and fails every batch in it.
func (s *Store) abort(group []*request, err error) {
	_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK")
	for _, r := range group {
		r.done <- response{err: err}
	}
}

func (s *Store) run(ctx context.Context, batch []store.Statement) ([]store.Result, error) {
	out := make([]store.Result, len(batch))
	for i, st := range batch {
		stmt, err := s.prepare(ctx, st.SQL)
		if err != nil {
			return nil, &store.SQLError{Index: i, Message: err.Error()}
		}
		res, err := stmt.ExecContext(ctx, st.Args...)
		if err != nil {
			return nil, &store.SQLError{Index: i, Message: err.Error()}
		}
		n, _ := res.RowsAffected()
		out[i] = store.Result{RowsAffected: n}
	}
	return out, nil
}

func (s *Store) prepare(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts[q]; ok {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(s.stmts) >= maxCachedStatements {
		for k, old := range s.stmts {
			old.Close()
			delete(s.stmts, k)
		}
	}
	s.stmts[q] = st
	return st, nil
}

// readStmt returns the prepared statement for a read, preparing it once.
func (s *Store) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if st, ok := s.reads[q]; ok {
		return st, nil
	}
	st, err := s.read.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(s.reads) >= maxCachedStatements {
		for k, old := range s.reads {
			old.Close()
			delete(s.reads, k)
		}
	}
	s.reads[q] = st
	return st, nil
}

// Query runs a read on the read pool.
func (s *Store) Query(ctx context.Context, q string, args ...any) (*store.Rows, error) {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, &store.SQLError{Index: -1, Message: err.Error()}
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, &store.SQLError{Index: -1, Message: err.Error()}
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("sqlite columns: %w", err)
	}
	out := &store.Rows{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("sqlite scan: %w", err)
		}
		for i, v := range vals {
			if i64, ok := v.(int); ok {
				vals[i] = int64(i64)
			}
		}
		out.Values = append(out.Values, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, &store.SQLError{Index: -1, Message: err.Error()}
	}
	return out, nil
}

// Close stops the writer and closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	<-s.stopped
	for _, st := range s.stmts {
		st.Close()
	}
	s.readMu.Lock()
	for _, st := range s.reads {
		st.Close()
	}
	s.readMu.Unlock()
	err := errors.Join(s.conn.Close(), s.write.Close(), s.read.Close())
	return errors.Join(err, s.lock.release()) // last: the file is closed
}
