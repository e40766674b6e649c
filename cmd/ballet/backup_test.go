package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/sqlite"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// backupConfig writes a configuration whose database is dir/core.db.
func backupConfig(t *testing.T, dir string) (cfgFile, dbPath string) {
	t.Helper()
	dbPath = filepath.Join(dir, "core.db")
	cfgFile = filepath.Join(dir, "ballet.toml")
	body := fmt.Sprintf("[storage]\npath = %q\n[auth]\nbootstrap_token = \"test-bootstrap-token-0123456789\"\nbootstrap_token_file = %q\n",
		dbPath, filepath.Join(dir, "bt"))
	if err := os.WriteFile(cfgFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgFile, dbPath
}

// invariants checks Ballet's own rules on a database: the event log has
// no gap (seq 1 … n), and every versioned row's version is the number of
// its events.
func invariants(t *testing.T, s store.Store) (events int) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Query(ctx, `SELECT seq FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows.Len() {
		var seq int64
		if err := rows.Scan(i, &seq); err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) {
			t.Fatalf("event seq gap: the %d-th event has seq %d", i+1, seq)
		}
	}
	for _, tbl := range []string{"organizations", "projects", "items"} {
		bad, err := s.Query(ctx, `SELECT t.id, t.version, (SELECT COUNT(*) FROM events e WHERE e.entity_id = t.id) FROM `+tbl+` t
WHERE t.version != (SELECT COUNT(*) FROM events e WHERE e.entity_id = t.id)`)
		if err != nil {
			t.Fatal(err)
		}
		if bad.Len() > 0 {
			t.Fatalf("%s: versions that are not their events' count: %v", tbl, bad.Values)
		}
	}
	return rows.Len()
}

// A backup taken while Core serves a steady load of writes is a
// consistent database: it passes integrity_check and Ballet's invariants;
// restoring it into a running Ballet's database is refused, restoring it
// into a fresh one works, and Core starts on it and serves what it holds.
func TestBackupUnderLoadRestoresAndServes(t *testing.T) {
	const token = "test-bootstrap-token-0123456789"
	cfgFile, dbPath := backupConfig(t, t.TempDir())
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := core.Open(ctx, core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	post := func(path, body string) error {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("POST %s: %s", path, resp.Status)
		}
		return nil
	}
	if err := post("/api/v1/orgs", `{"slug":"acme","name":"Acme"}`); err != nil {
		t.Fatal(err)
	}
	if err := post("/api/v1/orgs/acme/projects", `{"key":"ACME","name":"Acme","repository":{"forge":"git","url":"/srv/git/acme.git"}}`); err != nil {
		t.Fatal(err)
	}
	// The load: four writers creating tickets until told to stop.
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := post("/api/v1/projects/ACME/items", fmt.Sprintf(`{"type":"task","title":"w%d-%d"}`, w, i)); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		}()
	}
	apitest.Await(t, "200 tickets before the backup", func() bool { return created.Load() >= 200 })
	backup := filepath.Join(t.TempDir(), "snap.db")
	var out, errOut strings.Builder
	if code := run([]string{"backup", "--config", cfgFile, "--to", backup}, &out, &errOut); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errOut.String())
	}
	before := created.Load()
	apitest.Await(t, "100 tickets more after the backup", func() bool { return created.Load() >= before+100 })
	t.Logf("backup: %s", strings.TrimSpace(out.String()))
	if code := run([]string{"backup", "--config", cfgFile, "--to", backup}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "exists") {
		t.Errorf("a backup onto an existing file: exit %d, %q", code, errOut.String())
	}

	// Restoring over the database Core holds is refused, and changes nothing.
	errOut.Reset()
	if code := run([]string{"restore", "--config", cfgFile, "--from", backup}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "refusing to replace a live database") || !strings.Contains(errOut.String(), "core.db.lock") {
		t.Fatalf("restore onto the live database: exit %d, %q", code, errOut.String())
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a writer failed: %v", err)
	default:
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	live, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	liveEvents := invariants(t, live)
	live.Close()

	// Into a fresh database: integrity_check, invariants, and Core starts.
	freshCfg, freshDB := backupConfig(t, t.TempDir())
	out.Reset()
	errOut.Reset()
	if code := run([]string{"restore", "--config", freshCfg, "--from", backup}, &out, &errOut); code != 0 {
		t.Fatalf("restore into a fresh database: exit %d: %s", code, errOut.String())
	}
	if _, err := sqlite.Check(ctx, freshDB); err != nil {
		t.Fatal(err)
	}
	fcfg, err := config.Load(freshCfg)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := core.Open(ctx, core.Options{Config: fcfg})
	if err != nil {
		t.Fatalf("Core does not start on the restored database: %v", err)
	}
	events := invariants(t, restored.Store)
	items := restored.Store
	n := int64(0)
	rows, err := items.Query(ctx, `SELECT COUNT(*) FROM items`)
	if err != nil || rows.Scan(0, &n) != nil {
		t.Fatal(err)
	}
	if n < 200 || n >= created.Load() || events >= liveEvents {
		t.Fatalf("the backup holds %d tickets and %d events: want at least the 200 before it, fewer than the %d created and the %d events at the end",
			n, events, created.Load(), liveEvents)
	}
	rsrv := httptest.NewServer(restored.Handler())
	req, _ := http.NewRequest("GET", rsrv.URL+"/api/v1/items/ACME-1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the restored Core serves ACME-1: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	rsrv.Close()
	restored.Close()

	// Restoring again keeps the database it replaces beside it.
	out.Reset()
	if code := run([]string{"restore", "--config", freshCfg, "--from", backup}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "core.db.replaced-") {
		t.Fatalf("a second restore: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// Restore refuses what is not a backup of the service's database, and
// both commands name what is missing.
func TestRestoreRefusesWhatIsNotABackup(t *testing.T) {
	dir := t.TempDir()
	cfgFile, _ := backupConfig(t, dir)
	rq := filepath.Join(dir, "rqlite.toml")
	os.WriteFile(rq, []byte("[storage]\nengine = \"rqlite\"\nurl = \"http://127.0.0.1:4001\"\n"), 0o600)
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte("not a database, not at all, but long enough to be read as one"), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore", "--config", cfgFile, "--from", junk}, 1, "junk.db"},
		{[]string{"restore", "--config", cfgFile, "--from", filepath.Join(dir, "none.db")}, 1, "none.db"},
		{[]string{"restore", "--config", cfgFile}, 2, "--from FILE is required"},
		{[]string{"backup", "--config", cfgFile}, 2, "--to FILE is required"},
		{[]string{"backup", "--config", rq, "--to", filepath.Join(dir, "r.db")}, 2, "curl http://127.0.0.1:4001/db/backup"},
		{[]string{"restore", "--config", rq, "--from", junk}, 2, "back up and restore rqlite with rqlite itself"},
		{[]string{"backup", "--config", cfgFile, "--to", filepath.Join(dir, "b.db")}, 1, "core.db"}, // no database yet
	} {
		var out, errOut strings.Builder
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// On rqlite Ballet uses the engine's own backup, as docs/operations.md
// tells: GET /db/backup on a node while Core writes gives a SQLite file
// that passes integrity_check and Ballet's invariants; POST /db/load puts
// it into a fresh cluster, and Core starts on that cluster and serves
// what it holds.
func TestRqliteBackupRecipe(t *testing.T) {
	const token = "test-bootstrap-token-0123456789"
	ctx := context.Background()
	src := rqlitetest.Start(t, 1)
	cfg := config.Default()
	cfg.Storage.Engine, cfg.Storage.URL = "rqlite", src.URLs()[0]
	cfg.Auth.BootstrapToken, cfg.Auth.BootstrapTokenFile = token, filepath.Join(t.TempDir(), "bt")
	cfg.Storage.Path = filepath.Join(t.TempDir(), "core.db")
	c, err := core.Open(ctx, core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	call := func(base, method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	call(srv.URL, "POST", "/api/v1/orgs", `{"slug":"acme","name":"Acme"}`)
	call(srv.URL, "POST", "/api/v1/orgs/acme/projects", `{"key":"ACME","name":"Acme","repository":{"forge":"git","url":"/srv/git/acme.git"}}`)
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if code := call(srv.URL, "POST", "/api/v1/projects/ACME/items", fmt.Sprintf(`{"type":"task","title":"w%d-%d"}`, w, i)); code != 201 {
					t.Errorf("create a ticket: %d", code)
					return
				}
				created.Add(1)
			}
		}()
	}
	apitest.Await(t, "50 tickets before the backup", func() bool { return created.Load() >= 50 })

	// The recipe: curl -s -o FILE http://NODE:4001/db/backup
	resp, err := http.Get(src.URLs()[0] + "/db/backup")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /db/backup: %v %v", err, resp)
	}
	file := filepath.Join(t.TempDir(), "rqlite-backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.Close()
	before := created.Load()
	apitest.Await(t, "30 tickets more after the backup", func() bool { return created.Load() >= before+30 })
	close(stop)
	wg.Wait()
	snap, err := sqlite.Check(ctx, file)
	if err != nil {
		t.Fatalf("the rqlite backup: %v", err)
	}
	if err := store.CoreMigrations.Admits(snap.Migrations); err != nil {
		t.Fatal(err)
	}

	// The recipe: curl -XPOST -H 'Content-Type: application/octet-stream' --data-binary @FILE http://NEW:4001/db/load
	dst := rqlitetest.Start(t, 1)
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	load, err := http.Post(dst.URLs()[0]+"/db/load", "application/octet-stream", bytes.NewReader(body))
	if err != nil || load.StatusCode != 200 {
		t.Fatalf("POST /db/load: %v %v", err, load)
	}
	load.Body.Close()
	rcfg := cfg
	rcfg.Storage.URL = dst.URLs()[0]
	restored, err := core.Open(ctx, core.Options{Config: rcfg})
	if err != nil {
		t.Fatalf("Core does not start on the restored cluster: %v", err)
	}
	defer restored.Close()
	events := invariants(t, restored.Store)
	var n int64
	rows, err := restored.Store.Query(ctx, `SELECT COUNT(*) FROM items`)
	if err != nil || rows.Scan(0, &n) != nil {
		t.Fatal(err)
	}
	if n < 50 || n >= created.Load() || events < int(n) {
		t.Fatalf("the restored cluster holds %d tickets and %d events; want at least 50 tickets, fewer than the %d created", n, events, created.Load())
	}
	rsrv := httptest.NewServer(restored.Handler())
	defer rsrv.Close()
	if code := call(rsrv.URL, "GET", "/api/v1/items/ACME-1", ""); code != 200 {
		t.Fatalf("the restored Core serves ACME-1: %d", code)
	}
	if code := call(rsrv.URL, "POST", "/api/v1/projects/ACME/items", `{"type":"task","title":"after the restore"}`); code != 201 {
		t.Fatalf("the restored Core takes a new ticket: %d", code)
	}
	invariants(t, restored.Store)
}

// --knowledge backs up and restores the Knowledge service's own database,
// found through its configuration; a backup of Core's is not one of it.
func TestKnowledgeBackupAndRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kdb := filepath.Join(dir, "knowledge.db")
	kcfg := filepath.Join(dir, "knowledge.toml")
	os.WriteFile(kcfg, []byte(fmt.Sprintf("[storage]\npath = %q\n", kdb)), 0o600)
	s, err := sqlite.Open(ctx, kdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := knowledge.Migrations.Apply(ctx, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "k.db")
	var out, errOut strings.Builder
	if code := run([]string{"backup", "--knowledge", "--config", kcfg, "--to", backup}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "the Knowledge service's database") {
		t.Fatalf("backup --knowledge (served): exit %d, %q %q", code, out.String(), errOut.String())
	}
	s.Close()
	fresh := filepath.Join(t.TempDir(), "knowledge.toml")
	os.WriteFile(fresh, []byte(fmt.Sprintf("[storage]\npath = %q\n", filepath.Join(filepath.Dir(fresh), "knowledge.db"))), 0o600)
	if code := run([]string{"restore", "--knowledge", "--config", fresh, "--from", backup}, &out, &errOut); code != 0 {
		t.Fatalf("restore --knowledge: exit %d, %q", code, errOut.String())
	}
	// Core's configuration with a Knowledge backup: not Core's database.
	cfgFile, _ := backupConfig(t, t.TempDir())
	errOut.Reset()
	if code := run([]string{"restore", "--config", cfgFile, "--from", backup}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "is not a backup of Core's database: it holds migration 0001_knowledge") {
		t.Fatalf("a Knowledge backup into Core: exit %d, %q", code, errOut.String())
	}
}
