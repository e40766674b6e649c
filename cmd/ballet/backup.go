package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/sqlite"
)

const backupHelp = `Usage: ballet backup --to FILE [--config FILE] [--knowledge]

Writes a consistent snapshot of Core's SQLite database (storage.path of the
configuration, as 'ballet serve' reads it) to the new file FILE, while Core
goes on serving: SQLite's VACUUM INTO reads one snapshot without stopping
writers, and the file appears only once whole. With --knowledge it snapshots
the Knowledge service's database instead (--config then names the Knowledge
service's configuration, as for 'ballet knowledge'; default
data/knowledge.db). The snapshot is checked (SQLite's integrity_check) and
its size and time printed.

On rqlite ([storage] engine = "rqlite") use rqlite's own backup instead:
  curl -s -o FILE http://NODE:4001/db/backup
(docs/operations.md#backup-and-restore).

Exit status: 0 when the backup was written, 1 when it failed, 2 for a usage
or configuration error.
`

const restoreHelp = `Usage: ballet restore --from FILE [--config FILE] [--knowledge]

Replaces Core's SQLite database (storage.path of the configuration, as
'ballet serve' reads it) with the backup FILE; with --knowledge the
Knowledge service's database (--config names its configuration). FILE must
pass SQLite's integrity_check and be a database of the same service, from
this version of Ballet or an earlier one (Core migrates it when it starts).

It refuses while a running Ballet holds the database: 'ballet serve' (and
'ballet up''s Core, and 'ballet knowledge') hold an exclusive lock on
storage.path + ".lock" from start to exit, which the kernel frees when the
process ends, however it ends. Stop Ballet, restore, start it again. The
database replaced is kept beside it as storage.path + ".replaced-<time>"
(with its -wal and -shm files).

On rqlite, restore through rqlite itself (docs/operations.md#backup-and-restore).

Exit status: 0 when the database was restored, 1 when it failed (also: the
database is in use), 2 for a usage or configuration error.
`

// dbFlags are backup's and restore's flags: the file, and which
// service's database through which configuration.
type dbFlags struct {
	file      string
	knowledge bool
	cfg       config.Config
}

func parseDBFlags(name, fileFlag, fileUse, help string, args []string, stdout, stderr io.Writer) (dbFlags, int, bool) {
	fs := newFlags(name, stderr)
	path := fs.String("config", "", "TOML configuration `FILE` (optional: every key has a default)")
	file := fs.String(fileFlag, "", fileUse)
	know := fs.Bool("knowledge", false, "the Knowledge service's database (--config: its configuration)")
	if code, done := parseFlags(fs, args, help, stdout); done {
		return dbFlags{}, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ballet %s: unexpected argument %q\n", name, fs.Arg(0))
		return dbFlags{}, 2, false
	}
	if *file == "" {
		fmt.Fprintf(stderr, "ballet %s: --%s FILE is required\nRun 'ballet %s --help' for usage.\n", name, fileFlag, name)
		return dbFlags{}, 2, false
	}
	load := config.Load
	if *know {
		load = config.LoadKnowledge
	}
	cfg, err := load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "ballet:", err)
		return dbFlags{}, 2, false
	}
	if cfg.Storage.Engine != "sqlite" {
		fmt.Fprintf(stderr, "ballet %s: storage.engine is %q: back up and restore rqlite with rqlite itself (curl %s/db/backup -o FILE; docs/operations.md#backup-and-restore)\n",
			name, cfg.Storage.Engine, cfg.Storage.URLs()[0])
		return dbFlags{}, 2, false
	}
	return dbFlags{file: *file, knowledge: *know, cfg: cfg}, 0, true
}

// set is the migration set of the database the flags name.
func (f dbFlags) set() (string, store.MigrationSet) {
	if f.knowledge {
		return "the Knowledge service's", knowledge.Migrations
	}
	return "Core's", store.CoreMigrations
}

func backupCmd(args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseDBFlags("backup", "to", "the new `FILE` to write the snapshot to", backupHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	whose, _ := f.set()
	start := time.Now()
	if err := sqlite.Backup(ctx, f.cfg.Storage.Path, f.file); err != nil {
		fmt.Fprintf(stderr, "ballet backup: %s database: %v\n", whose, err)
		return 1
	}
	took := time.Since(start)
	snap, err := sqlite.Check(ctx, f.file)
	if err != nil {
		fmt.Fprintf(stderr, "ballet backup: the snapshot: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backed up %s database %s to %s: %d bytes, %d migrations, in %s (integrity_check ok)\n",
		whose, f.cfg.Storage.Path, f.file, snap.Bytes, len(snap.Migrations), took.Round(time.Millisecond))
	return 0
}

func restoreCmd(args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseDBFlags("restore", "from", "the backup `FILE` to restore", restoreHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	whose, set := f.set()
	snap, err := sqlite.Check(ctx, f.file)
	if err != nil {
		fmt.Fprintf(stderr, "ballet restore: %v\n", err)
		return 1
	}
	if err := set.Admits(snap.Migrations); err != nil {
		fmt.Fprintf(stderr, "ballet restore: %s is not a backup of %s database: %v\n", f.file, whose, err)
		return 1
	}
	aside, err := sqlite.Restore(f.file, f.cfg.Storage.Path, time.Now())
	var locked *sqlite.LockedError
	if errors.As(err, &locked) {
		fmt.Fprintf(stderr, "ballet restore: refusing to replace a live database: %v; stop it first\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "ballet restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s database %s from %s (%d bytes, %d migrations)\n", whose, f.cfg.Storage.Path, f.file, snap.Bytes, len(snap.Migrations))
	if aside != "" {
		fmt.Fprintf(stdout, "the database it replaced is kept as %s\n", aside)
	}
	return 0
}
