// Package giteatest starts a real Gitea (the pinned release, built once
// per machine by scripts/gitea.sh) on 127.0.0.1 for tests, and seeds it:
// users with tokens, repositories with an initial commit on main,
// collaborators, pushed branches, commit statuses, reviews, branch
// protections, webhooks, pull requests closed or merged by hand.
//
// One server serves a whole test package: TestMain calls Main, tests call
// Shared. Start gives a test a server of its own. Every server keeps its
// data (SQLite, repositories, logs) in its own temporary folder, runs in its
// own process group that the kernel kills with the test binary (no
// orphans), and prints its log tail when a test using it failed.
//
// The binary is $BALLET_GITEA, else the cached
// ${XDG_CACHE_HOME:-~/.cache}/ballet/bin/gitea-v1.26.0, with its options
// and templates in the folder beside it named like it plus -static.
// BALLET_SKIP_GITEA=1 skips the tests that need it; a missing binary, or one
// without its -static folder, fails them under CI=true and is a counted skip
// otherwise (package parts).
package giteatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ballet/ballet/internal/gitexec"
	"github.com/ballet/ballet/internal/procgroup"
	"github.com/ballet/ballet/internal/testkit/parts"
)

// Version is the Gitea release the tests run against.
const Version = "v1.26.0"

// Parallel is how many parallel tests of a package run at once against
// its Gitea (Main).
const Parallel = 8

// SkipEnv set to 1 skips every test that needs Gitea.
const SkipEnv = "BALLET_SKIP_GITEA"

// BinaryEnv names the Gitea binary.
const BinaryEnv = "BALLET_GITEA"

const (
	pollInterval = 20 * time.Millisecond
	// maxWait bounds the wait for the server to answer: a hang guard.
	maxWait = time.Minute
	logTail = 60
	// AdminName is the site administrator every server is seeded with.
	AdminName = "ballet-admin"
)

// Binary returns the Gitea binary's path (package doc), skipping or failing
// the test when there is none (package parts).
func Binary(t testing.TB) string {
	t.Helper()
	parts.Asked(t, parts.Gitea, SkipEnv)
	path, err := binary()
	if err != nil {
		parts.Missing(t, parts.Gitea, fmt.Errorf("giteatest: %w", err))
	}
	return path
}

func binary() (string, error) {
	path := os.Getenv(BinaryEnv)
	if path == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find the home folder: %w", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		path = filepath.Join(cache, "ballet", "bin", "gitea-"+Version)
	}
	build := fmt.Sprintf("build it with scripts/gitea.sh (make test does) or set %s; %s=1 skips the tests that need it", BinaryEnv, SkipEnv)
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return "", fmt.Errorf("gitea %s not found at %s: %s", Version, path, build)
	}
	if fi, err := os.Stat(staticDir(path)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("gitea %s: its options and templates are not at %s: %s", Version, staticDir(path), build)
	}
	return path, nil
}

// staticDir holds the options and templates a Gitea built without bindata
// reads (scripts/gitea.sh copies them there).
func staticDir(bin string) string { return bin + "-static" }

// Server is a running Gitea.
type Server struct {
	URL     string // http://127.0.0.1:port, no trailing slash
	Admin   User   // the site administrator
	Dir     string // its data folder
	LogPath string // its stdout and stderr

	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	n    int // names made, for unique names
}

// User is a Gitea account with an API token (scope all).
type User struct {
	Name, Password, Token string
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Main runs a test package's tests (TestMain: os.Exit(giteatest.Main(m)))
// and stops the package's shared server, if a test started it. Unless
// -test.parallel is given, up to Parallel parallel tests run at once: they
// wait on Gitea, not on the CPU, and at GOMAXPROCS (go test's default) a
// table of rows on a 2-core machine runs two at a time.
func Main(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(max(Parallel, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.Stop()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "giteatest: shared server log, last %d lines of %s:\n%s\n", logTail, shared.srv.LogPath, shared.srv.tail())
		}
	}
	return code
}

// Shared returns the test package's server, starting it on first use. The
// package's TestMain must call Main, which stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "giteatest-")
		if err == nil {
			shared.srv, err = Launch(bin, dir)
		}
		shared.err = err
	}
	if shared.err != nil {
		t.Fatalf("giteatest: %v", shared.err)
	}
	return shared.srv
}

// Start starts a server for this test only; it is stopped when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch(Binary(t), t.TempDir())
	if err != nil {
		t.Fatalf("giteatest: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("giteatest: log, last %d lines of %s:\n%s", logTail, s.LogPath, s.tail())
		}
	})
	return s
}

// Launch starts the Gitea at bin with its data under dir, outside any test,
// seeded with the administrator, and returns once its API answers. Stop
// kills it.
func Launch(bin, dir string) (*Server, error) {
	s := &Server{bin: bin, Dir: dir, LogPath: filepath.Join(dir, "gitea.log")}
	pw, err := secret(12)
	if err != nil {
		return nil, err
	}
	s.Admin = User{Name: AdminName, Password: pw}
	// Another process may take the free port before Gitea binds it: try
	// again on another one.
	for attempt := 1; ; attempt++ {
		err = s.boot()
		if err == nil {
			break
		}
		s.Stop()
		if attempt == 3 || !strings.Contains(readFile(s.LogPath), "address already in use") {
			return nil, fmt.Errorf("%w\nlast %d lines of %s:\n%s", err, logTail, s.LogPath, s.tail())
		}
	}
	tok, err := s.newToken(context.Background(), s.Admin)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Admin.Token = tok
	return s, nil
}

func (s *Server) boot() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.URL = "http://127.0.0.1:" + port
	if err := s.writeConfig(port); err != nil {
		return err
	}
	if _, err := s.cli("migrate"); err != nil {
		return err
	}
	if _, err := s.cli("admin", "user", "create", "--admin", "--username", s.Admin.Name, "--password", s.Admin.Password,
		"--email", s.Admin.Name+"@ballet.invalid", "--must-change-password=false"); err != nil &&
		!strings.Contains(err.Error(), "already exists") {
		return err
	}
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "web", "--config", s.config(), "--work-path", s.Dir)
	cmd.Env = s.env()
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Own(cmd, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	return s.waitReady()
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(maxWait)
	var last string
	for {
		select {
		case <-s.done:
			return fmt.Errorf("gitea exited before it answered on %s", s.URL)
		default:
		}
		status, body, err := s.do(context.Background(), http.MethodGet, "/api/v1/version", "", nil)
		if err == nil && status == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("HTTP %d %s %v", status, body, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("gitea did not answer on %s after %s: %s", s.URL, maxWait, last)
		}
		time.Sleep(pollInterval)
	}
}

// Stop kills the server's process group and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		procgroup.Kill(s.cmd)
	}
	<-s.done
}

func (s *Server) config() string { return filepath.Join(s.Dir, "app.ini") }

func (s *Server) env() []string {
	return append(gitexec.Base(), "HOME="+filepath.Join(s.Dir, "home"), "GITEA_WORK_DIR="+s.Dir)
}

// cli runs a gitea command on the server's configuration.
func (s *Server) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), maxWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append(args, "--config", s.config(), "--work-path", s.Dir)...)
	cmd.Env = s.env()
	cmd.Dir = s.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("gitea %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (s *Server) writeConfig(port string) error {
	key, err := secret(32)
	if err != nil {
		return err
	}
	runUser := "ballet"
	if u, err := user.Current(); err == nil {
		runUser = u.Username
	}
	root := ""
	if os.Geteuid() == 0 {
		root = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n"
	}
	d := s.Dir
	ini := fmt.Sprintf(`APP_NAME = ballet-test
RUN_MODE = prod
RUN_USER = %[1]s
WORK_PATH = %[2]s
%[3]s
[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[4]s
ROOT_URL = http://127.0.0.1:%[4]s/
LOCAL_ROOT_URL = http://127.0.0.1:%[4]s/
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
OFFLINE_MODE = true
APP_DATA_PATH = %[2]s/data
STATIC_ROOT_PATH = %[5]s

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[6]s
PASSWORD_HASH_ALGO = pbkdf2$1000$50
PASSWORD_COMPLEXITY = off
MIN_PASSWORD_LENGTH = 8
DISABLE_QUERY_AUTH_TOKEN = true

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
ENABLE_NOTIFY_MAIL = false

[mailer]
ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[log]
MODE = console
LEVEL = Warn

[webhook]
ALLOWED_HOST_LIST = loopback
SKIP_TLS_VERIFY = true
DELIVER_TIMEOUT = 10

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[picture]
DISABLE_GRAVATAR = true
`, runUser, d, root, port, staticDir(s.bin), key)
	for _, sub := range []string{"data", "repos", "home", "log"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(s.config(), []byte(ini), 0o600)
}

func secret(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// httpClient bounds a test's API call to the shared Gitea generously: a
// Gitea serving several test packages on a loaded CI machine took 3–4 s
// per write and over 30 s for a merge on a protected branch; a slow answer
// is not what these tests test.
var httpClient = &http.Client{Timeout: 3 * time.Minute}

// do sends one API request; auth is "token X", "basic user:password" or "".
func (s *Server) do(ctx context.Context, method, path, auth string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if kind, v, ok := strings.Cut(auth, " "); ok {
		switch kind {
		case "token":
			req.Header.Set("Authorization", "token "+v)
		case "basic":
			u, p, _ := strings.Cut(v, ":")
			req.SetBasicAuth(u, p)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// newToken creates an API token (scope all) for u, authenticated by its
// password.
func (s *Server) newToken(ctx context.Context, u User) (string, error) {
	name, _ := secret(4)
	status, body, err := s.do(ctx, http.MethodPost, "/api/v1/users/"+u.Name+"/tokens", "basic "+u.Name+":"+u.Password,
		map[string]any{"name": "test-" + name, "scopes": []string{"all"}})
	if err != nil {
		return "", fmt.Errorf("create a token for %s: %w", u.Name, err)
	}
	if status != http.StatusCreated {
		return "", fmt.Errorf("create a token for %s: HTTP %d: %s", u.Name, status, body)
	}
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.SHA1 == "" {
		return "", fmt.Errorf("create a token for %s: %q: %v", u.Name, body, err)
	}
	return tok.SHA1, nil
}

func (s *Server) tail() string {
	lines := strings.Split(strings.TrimRight(readFile(s.LogPath), "\n"), "\n")
	if len(lines) > logTail {
		lines = lines[len(lines)-logTail:]
	}
	return strings.Join(lines, "\n")
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	return string(b)
}

// Client returns an SDK client acting as u.
func (s *Server) Client(t testing.TB, u User) *gitea.Client {
	t.Helper()
	c, err := gitea.NewClient(s.URL, gitea.SetToken(u.Token), gitea.SetGiteaVersion(""), gitea.SetHTTPClient(httpClient))
	if err != nil {
		t.Fatalf("giteatest: client: %v", err)
	}
	return c
}

// unique returns prefix with a number unique on this server.
func (s *Server) unique(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("%s%d", prefix, s.n)
}
