package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ballet knowledge refuses to start without the service credential and on
// a bad key, naming the key, with exit status 2.
func TestKnowledgeRefusesToStart(t *testing.T) {
	t.Setenv("BALLET_KNOWLEDGE_TOKEN", "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[knowledge]\nauth_cache = \"1h\"\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"knowledge"}, "knowledge.service_token: must be set"},
		{[]string{"knowledge", "--config", bad}, "knowledge.auth_cache"},
		{[]string{"knowledge", "--core", "nope"}, "knowledge.core"},
		{[]string{"knowledge", "extra"}, "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: %d %s, want 2 naming %q", c.args, code, errb.String(), c.want)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"knowledge", "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "BALLET_KNOWLEDGE_TOKEN") {
		t.Errorf("help: %d %s", code, out.String())
	}
}

// TestKnowledgeRunsWithCoresDataUnreadable: the real `ballet knowledge`
// keeps and finds entries while Core's data folder, beside its own, is
// unreadable to it (as root, the service runs as nobody, for whom the
// folder's mode 0700 shuts it out; otherwise the folder is mode 000).
func TestKnowledgeRunsWithCoresDataUnreadable(t *testing.T) {
	t.Parallel()
	const token = "knowledge-test-token-0123456789abcdef"
	// Not t.TempDir: its parent is mode 0700, closed to nobody.
	dir, err := os.MkdirTemp("", "ballet-knowledge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	coreData := filepath.Join(dir, "data")
	if err := os.MkdirAll(coreData, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(coreData, "core.db"), []byte("Core's database"), 0o600)
	mode := os.FileMode(0o700)
	if os.Getuid() != 0 {
		mode = 0
	}
	os.Chmod(coreData, mode)
	t.Cleanup(func() { os.Chmod(coreData, 0o700) })
	kdir := filepath.Join(dir, "knowledge")
	os.MkdirAll(kdir, 0o777)
	os.Chmod(kdir, 0o777)
	bin := filepath.Join(dir, "ballet")
	// cp writes the copy: a file this process wrote could still be open in
	// a child another test forks meanwhile, and exec would then fail with
	// "text file busy".
	if out, err := exec.Command("cp", binary, bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the binary: %v: %s", err, out)
	}
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Credential string }
		json.NewDecoder(r.Body).Decode(&in)
		if r.URL.Path != "/api/v1/internal/introspect" || r.Header.Get("Authorization") != "Bearer "+token || in.Credential != "ann-token" {
			json.NewEncoder(w).Encode(map[string]any{"active": false})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"active": true, "subject": "ann", "name": "Ann", "kind": "human",
			"orgs": []any{map[string]any{"slug": "acme", "id": "x", "role": "member"}}})
	}))
	defer core.Close()
	addr := freeAddr(t)
	cfg := fmt.Sprintf("[http]\naddr = %q\n[storage]\npath = %q\n[knowledge]\ncore = %q\n", addr, filepath.Join(kdir, "data", "knowledge.db"), core.URL)
	os.WriteFile(filepath.Join(kdir, "knowledge.toml"), []byte(cfg), 0o644)
	cmd := exec.Command(bin, "knowledge", "--config", "knowledge.toml")
	cmd.Dir = kdir
	cmd.Env = append(os.Environ(), "BALLET_KNOWLEDGE_TOKEN="+token)
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("ballet knowledge printed:\n%s", out.String())
		}
	}()
	base := "http://" + addr
	for deadline := time.Now().Add(upGuard); ; time.Sleep(50 * time.Millisecond) { // a wait for readiness, bounded: no speed claim
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("ballet knowledge exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("ballet knowledge did not become ready")
		}
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/knowledge/orgs/acme/spaces/default/entries",
		strings.NewReader(`{"slug":"guides/deploy","title":"Deploying","body":"Roll back with make rollback."}`))
	req.Header.Set("Authorization", "Bearer ann-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	var found struct{ Results []struct{ Slug string } }
	if st := getJSON(t, base+"/api/v1/knowledge/orgs/acme/search?q=rollback", "ann-token", &found); st != 200 || len(found.Results) != 1 {
		t.Fatalf("search: %d %+v", st, found)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("ballet knowledge after SIGTERM: %v", err)
	}
	st, err := os.Stat(filepath.Join(kdir, "data", "knowledge.db"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; os.Getuid() == 0 && uid != 65534 {
		t.Fatalf("knowledge.db belongs to uid %d: the service did not run as nobody", uid)
	}
	// The folder really is closed to it: a service told to keep its
	// database there cannot start.
	bad := fmt.Sprintf("[http]\naddr = %q\n[storage]\npath = %q\n[knowledge]\ncore = %q\n", freeAddr(t), filepath.Join(coreData, "knowledge.db"), core.URL)
	os.WriteFile(filepath.Join(kdir, "bad.toml"), []byte(bad), 0o644)
	cmd = exec.Command(bin, "knowledge", "--config", "bad.toml")
	cmd.Dir, cmd.Env = kdir, append(os.Environ(), "BALLET_KNOWLEDGE_TOKEN="+token)
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if msg, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "permission denied") {
		t.Fatalf("a service with its database in Core's folder: %v %s", err, msg)
	}
}
