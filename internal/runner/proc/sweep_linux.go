package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
	"golang.org/x/sys/unix"
)

// record is a session's state file: which runner started it, and its
// process group (0 until the command has started).
type record struct {
	ID          string `json:"id"`
	PID         int    `json:"pid,omitempty"`
	PGID        int    `json:"pgid,omitempty"`
	RunnerPID   int    `json:"runner_pid"`
	RunnerStart uint64 `json:"runner_start"` // the runner's start time (/proc/<pid>/stat), against PID reuse
}

var self struct {
	once  sync.Once
	start uint64
	err   error
}

// selfStart is this process's start time as /proc reports it.
func selfStart() (uint64, error) {
	self.once.Do(func() {
		st, err := readStat(os.Getpid())
		self.start, self.err = st.start, err
	})
	return self.start, self.err
}

// writeRecord writes r (for this runner) into dir atomically and returns
// its path.
func writeRecord(dir string, r record) (string, error) {
	start, err := selfStart()
	if err != nil {
		return "", fmt.Errorf("proc: %w", err)
	}
	r.RunnerPID, r.RunnerStart = os.Getpid(), start
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("proc: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("proc: state: %w", err)
	}
	path := filepath.Join(dir, r.ID+".json")
	tmp, err := os.CreateTemp(dir, ".new-")
	if err != nil {
		return "", fmt.Errorf("proc: state: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("proc: state: %w", err)
	}
	return path, nil
}

func (s *Session) removeRecord() {
	if s.record != "" {
		_ = os.Remove(s.record)
	}
}

// Swept is a session of a dead runner that Sweep cleaned up.
type Swept struct {
	ID     string
	Killed []int // the processes it killed
}

// Sweep cleans up after runners that died: for every session recorded in
// dir whose runner is gone (no such process, or another process under its
// PID), it kills every process that carries the session's marker, and the
// whole process group the session was recorded with when a marked process
// is still in it; then it removes the record. Records of live runners are
// left alone. A missing dir has nothing to sweep.
func Sweep(dir string) ([]Swept, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("proc: sweep: %w", err)
	}
	var swept []Swept
	var errs []error
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".new-") { // a record being written when its runner died
			if runnerGone(path) {
				_ = os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("proc: sweep: %w", err))
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.ID+".json" != name || !idRE.MatchString(r.ID) {
			errs = append(errs, fmt.Errorf("proc: sweep: %s is not a session record", path))
			continue
		}
		if alive(r.RunnerPID, r.RunnerStart) {
			continue
		}
		killed := killMarked(r.ID, r.PGID)
		if left := marked(r.ID); len(left) > 0 {
			errs = append(errs, fmt.Errorf("proc: sweep: session %s: processes %v survived SIGKILL", r.ID, left))
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("proc: sweep: %w", err))
		}
		swept = append(swept, Swept{ID: r.ID, Killed: killed})
	}
	return swept, errors.Join(errs...)
}

// runnerGone reports whether a half-written record is old enough that its
// runner cannot still be writing it.
func runnerGone(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && time.Since(fi.ModTime()) > time.Minute
}

// alive reports whether the process pid is running and is the one that
// started at start (and not a later process that reused its PID).
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := readStat(pid)
	return err == nil && st.state != 'Z' && st.start == start
}

// killMarked kills, with SIGKILL, every live process that carries the
// marker of session id and, when one of them is in process group pgid,
// that whole group (its members forked from the session, even those that
// cleared their environment). It repeats until no marked process is left
// (a process may fork while it is being killed), waits for each to die
// (bounded), and returns the processes it killed.
func killMarked(id string, pgid int) []int {
	var killed []int
	for round := 0; round < 10; round++ {
		procs := scan(id)
		var targets []int
		group := false
		for _, p := range procs {
			if p.marked {
				targets = append(targets, p.pid)
				group = group || (pgid > 0 && p.pgid == pgid)
			}
		}
		if group {
			_ = procgroup.Signal(pgid, syscall.SIGKILL)
			for _, p := range procs {
				if p.pgid == pgid && !p.marked {
					targets = append(targets, p.pid)
				}
			}
		}
		if len(targets) == 0 {
			return killed
		}
		for _, pid := range targets {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range targets {
			waitGone(pid, 2*time.Second)
		}
		killed = append(killed, targets...)
	}
	return killed
}

// Process is a live process of a session: its PID and process group.
type Process struct {
	PID, PGID int
}

// Find lists the live processes (zombies left out) that carry the marker
// of session id, whoever started them: what a session still runs, or
// what a dead runner's session left behind.
func Find(id string) []Process {
	var out []Process
	for _, p := range scan(id) {
		if p.marked {
			out = append(out, Process{PID: p.pid, PGID: p.pgid})
		}
	}
	return out
}

// marked lists the live processes that carry the marker of session id.
func marked(id string) []int {
	var pids []int
	for _, p := range Find(id) {
		pids = append(pids, p.PID)
	}
	return pids
}

// waitGone waits until process pid has exited (a zombie counts), at most d.
func waitGone(pid int, d time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already (ESRCH), or no pidfd: nothing to wait on
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			return
		}
	}
}

type procInfo struct {
	pid, pgid int
	marked    bool // carries the marker of the session scanned for
}

// scan lists the live processes (zombies left out), other than this one,
// and whether each carries the marker of session id ("": none is looked
// for).
func scan(id string) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(Marker(id))
	me := os.Getpid()
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		p := procInfo{pid: pid, pgid: st.pgid}
		if id == "" {
			out = append(out, p)
			continue
		}
		if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if bytes.Equal(kv, want) {
					p.marked = true
					break
				}
			}
		}
		out = append(out, p)
	}
	return out
}

type stat struct {
	state byte
	pgid  int
	start uint64 // clock ticks after boot
}

// readStat reads the state, process group and start time of process pid.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("proc: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("proc: /proc/%d/stat: unexpected format", pid)
	}
	pgid, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, fmt.Errorf("proc: /proc/%d/stat: unexpected format", pid)
	}
	return stat{state: f[0][0], pgid: pgid, start: start}, nil
}
