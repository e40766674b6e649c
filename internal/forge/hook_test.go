package forge

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestVerifySignature: a delivery is genuine only with the HMAC-SHA256 of
// its body under the project's secret, in the forge's own header format.
func TestVerifySignature(t *testing.T) {
	body := []byte(`{"number":7}`)
	for _, kind := range []string{KindGitea, KindGitHub} {
		good := Sign(kind, body, "s3cret")
		if !VerifySignature(kind, good, body, "s3cret") {
			t.Errorf("%s: its own signature refused", kind)
		}
		for name, c := range map[string]struct {
			sig, secret string
			body        []byte
		}{
			"missing":            {"", "s3cret", body},
			"other secret":       {Sign(kind, body, "other"), "s3cret", body},
			"other body":         {good, "s3cret", []byte(`{"number":8}`)},
			"no secret":          {Sign(kind, body, ""), "", body},
			"not hex":            {strings.Repeat("z", 64), "s3cret", body},
			"short":              {good[:len(good)-2], "s3cret", body},
			"trailing garbage":   {good + "zz", "s3cret", body},
			"the other's format": {Sign(map[string]string{KindGitea: KindGitHub, KindGitHub: KindGitea}[kind], body, "s3cret"), "s3cret", body},
		} {
			if VerifySignature(kind, c.sig, c.body, c.secret) {
				t.Errorf("%s: %s accepted", kind, name)
			}
		}
	}
}

// TestParseHook: every relevant event of both forges names the pull
// requests, branches or commits it concerns.
func TestParseHook(t *testing.T) {
	for _, c := range []struct {
		kind, event, body string
		want              Hook
	}{
		{KindGitea, "pull_request", `{"action":"opened","number":7,"pull_request":{"number":7,"head":{"ref":"ballet/ACME-1","sha":"abc"}}}`,
			Hook{Numbers: []int{7}, Branches: []string{"ballet/ACME-1"}, SHAs: []string{"abc"}}},
		{KindGitea, "pull_request_review_approved", `{"action":"reviewed","number":7,"pull_request":{"number":7,"head":{"ref":"ballet/ACME-1","sha":"abc"}},"review":{"type":"pull_request_review_approved"}}`,
			Hook{Numbers: []int{7}, Branches: []string{"ballet/ACME-1"}, SHAs: []string{"abc"}}},
		{KindGitea, "pull_request_sync", `{"number":9}`, Hook{Numbers: []int{9}}},
		{KindGitea, "status", `{"sha":"def","context":"ci","state":"success","commit":{"id":"def"},"branches":[{"name":"ballet/ACME-2"}]}`,
			Hook{Branches: []string{"ballet/ACME-2"}, SHAs: []string{"def"}}},
		{KindGitHub, "pull_request", `{"action":"synchronize","number":3,"pull_request":{"number":3,"head":{"ref":"ballet/X-1","sha":"110"}}}`,
			Hook{Numbers: []int{3}, Branches: []string{"ballet/X-1"}, SHAs: []string{"110"}}},
		{KindGitHub, "pull_request_review", `{"action":"submitted","pull_request":{"number":3,"head":{"ref":"ballet/X-1","sha":"111"}}}`,
			Hook{Numbers: []int{3}, Branches: []string{"ballet/X-1"}, SHAs: []string{"111"}}},
		{KindGitHub, "status", `{"sha":"222","branches":[{"name":"ballet/X-2"},{"name":"main"}]}`,
			Hook{Branches: []string{"ballet/X-2", "main"}, SHAs: []string{"222"}}},
		{KindGitHub, "check_run", `{"check_run":{"head_sha":"333","check_suite":{"head_branch":"ballet/X-3"},"pull_requests":[{"number":5,"head":{"ref":"ballet/X-3","sha":"333"}}]}}`,
			Hook{Numbers: []int{5}, Branches: []string{"ballet/X-3"}, SHAs: []string{"333"}}},
		{KindGitea, "status", `{"commit":{"id":"dee"}}`, Hook{SHAs: []string{"dee"}}},
		{KindGitHub, "check_run", `{"check_run":{"head_sha":"336","check_suite":{"head_branch":"ballet/X-6"},"pull_requests":[]}}`,
			Hook{Branches: []string{"ballet/X-6"}, SHAs: []string{"336"}}},
		{KindGitHub, "check_suite", `{"check_suite":{"head_sha":"444","head_branch":"refs/heads/ballet/X-4","pull_requests":[]}}`,
			Hook{Branches: []string{"ballet/X-4"}, SHAs: []string{"444"}}},
		{KindGitHub, "check_suite", `{"check_suite":{"head_sha":"555","head_branch":"ballet/X-5","pull_requests":[{"number":6,"head":{"ref":"ballet/X-5","sha":"555"}}]}}`,
			Hook{Numbers: []int{6}, Branches: []string{"ballet/X-5"}, SHAs: []string{"555"}}},
	} {
		if !Relevant(c.kind, c.event) {
			t.Errorf("%s %s is not relevant", c.kind, c.event)
		}
		got, err := ParseHook(c.kind, c.event, []byte(c.body))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: %+v, %v; want %+v", c.kind, c.event, got, err, c.want)
		}
	}
	for _, irrelevant := range []struct{ kind, event string }{{KindGitHub, "ping"}, {KindGitHub, "push"}, {KindGitea, "push"}, {KindGitea, "issues"}} {
		if Relevant(irrelevant.kind, irrelevant.event) {
			t.Errorf("%v is relevant", irrelevant)
		}
	}
	for _, bad := range []string{``, `[]`, `{"number":"7"}`, `{}`, `{"pull_request":{"number":0}}`, `nul`} {
		if _, err := ParseHook(KindGitea, "pull_request", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	h := Hook{Numbers: []int{7}, Branches: []string{"ballet/A-1"}, SHAs: []string{"abc"}}
	for pr, want := range map[PullRequest]bool{
		{Number: 7}: true, {Branch: "ballet/A-1"}: true, {HeadSHA: "abc"}: true, {Number: 8, Branch: "ballet/A-2", HeadSHA: "x"}: false, {}: false,
	} {
		if h.Names(pr) != want {
			t.Errorf("Names(%+v) = %v", pr, !want)
		}
	}
}

// FuzzParseHook: no delivery body makes the parser panic, and what it
// returns is bounded and names something.
func FuzzParseHook(f *testing.F) {
	f.Add("pull_request", []byte(`{"number":7,"pull_request":{"number":7,"head":{"ref":"ballet/A-1","sha":"abc"}}}`))
	f.Add("status", []byte(`{"sha":"def","branches":[{"name":"x"}],"commit":{"id":"d"}}`))
	f.Add("check_run", []byte(`{"check_run":{"head_sha":"1","pull_requests":[{"number":2}]}}`))
	f.Add("check_suite", []byte(`{"check_suite":{"head_branch":"b"}}`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		for _, kind := range []string{KindGitea, KindGitHub} {
			h, err := ParseHook(kind, event, body)
			if err == nil && (h.Empty() || len(h.Numbers) > MaxHookRefs || len(h.Branches) > MaxHookRefs || len(h.SHAs) > MaxHookRefs) {
				t.Fatalf("%+v", h)
			}
		}
	})
}

// TestHookHeaders: each forge signs and names its deliveries in its own
// headers; the wrong one would refuse every genuine delivery.
func TestHookHeaders(t *testing.T) {
	for kind, want := range map[string][2]string{
		KindGitea:  {"X-Gitea-Signature", "X-Gitea-Event"},
		KindGitHub: {"X-Hub-Signature-256", "X-GitHub-Event"},
	} {
		if got := [2]string{SignatureHeader(kind), EventHeader(kind)}; got != want {
			t.Errorf("%s: headers %v, want %v", kind, got, want)
		}
	}
}

// TestParseHookBounded: a delivery naming more than MaxHookRefs pull
// requests, branches or commits is cut at exactly MaxHookRefs of each.
func TestParseHookBounded(t *testing.T) {
	var prs []string
	for i := 1; i <= MaxHookRefs+20; i++ {
		prs = append(prs, fmt.Sprintf(`{"number":%d,"head":{"ref":"b%d","sha":"s%d"}}`, i, i, i))
	}
	h, err := ParseHook(KindGitHub, "check_run", []byte(`{"check_run":{"pull_requests":[`+strings.Join(prs, ",")+`]}}`))
	if err != nil || len(h.Numbers) != MaxHookRefs || len(h.Branches) != MaxHookRefs || len(h.SHAs) != MaxHookRefs {
		t.Fatalf("%d numbers, %d branches, %d commits, %v; want %d of each", len(h.Numbers), len(h.Branches), len(h.SHAs), err, MaxHookRefs)
	}
}
