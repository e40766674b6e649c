package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Webhooks: a forge's delivery about a pull request, a review or a check,
// verified by its signature and read into what identifies the pull
// requests it concerns. Pure: the HTTP side is the server's.

// SignatureHeader is the header that carries a delivery's signature on a
// forge kind (Gitea: hex HMAC-SHA256 of the body; GitHub: the same,
// prefixed "sha256=").
func SignatureHeader(kind string) string {
	if kind == KindGitHub {
		return "X-Hub-Signature-256"
	}
	return "X-Gitea-Signature"
}

// EventHeader is the header that names a delivery's event.
func EventHeader(kind string) string {
	if kind == KindGitHub {
		return "X-GitHub-Event"
	}
	return "X-Gitea-Event"
}

// VerifySignature reports whether signature (the SignatureHeader's value)
// is the HMAC-SHA256 of body under secret, compared in constant time.
func VerifySignature(kind, signature string, body []byte, secret string) bool {
	if kind == KindGitHub {
		var ok bool
		if signature, ok = strings.CutPrefix(signature, "sha256="); !ok {
			return false
		}
	}
	got, err := hex.DecodeString(strings.TrimSpace(signature))
	if err != nil || len(got) != sha256.Size || secret == "" {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign is the SignatureHeader value a forge sends with body under secret
// (for tests and tools that deliver like a forge).
func Sign(kind string, body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	s := hex.EncodeToString(mac.Sum(nil))
	if kind == KindGitHub {
		return "sha256=" + s
	}
	return s
}

// Hook is what a delivery says about which pull requests changed: their
// numbers, head branches and head commits (any may be empty). A merge
// stage waiting for one of them checks it at once.
type Hook struct {
	Numbers  []int
	Branches []string
	SHAs     []string
}

// Empty reports whether the hook names no pull request.
func (h Hook) Empty() bool { return len(h.Numbers) == 0 && len(h.Branches) == 0 && len(h.SHAs) == 0 }

// Relevant reports whether a delivery of event on a forge kind can concern
// a merge stage: pull requests and their reviews, commit statuses, and on
// GitHub check runs and suites. Others (pushes, issues, GitHub's ping) are
// answered and ignored.
func Relevant(kind, event string) bool {
	if kind == KindGitHub {
		return slices.Contains([]string{"pull_request", "pull_request_review", "status", "check_run", "check_suite"}, event)
	}
	// Gitea: pull_request, pull_request_sync, pull_request_review_approved,
	// _rejected, _comment, …, and status.
	return event == "status" || event == "pull_request" || strings.HasPrefix(event, "pull_request_")
}

// MaxHookRefs bounds the pull requests, branches and commits one delivery
// may name.
const MaxHookRefs = 100

// hookPR is a pull request as deliveries show it.
type hookPR struct {
	Number int `json:"number"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
}

// hookBody is the union of the payload fields Ballet reads, of every
// relevant event of both forges.
type hookBody struct {
	Number      int     `json:"number"`
	PullRequest *hookPR `json:"pull_request"`
	SHA         string  `json:"sha"` // status
	Commit      *struct {
		ID string `json:"id"`
	} `json:"commit"` // Gitea's status
	Branches []struct {
		Name string `json:"name"`
	} `json:"branches"` // status
	CheckRun *struct {
		HeadSHA      string   `json:"head_sha"`
		PullRequests []hookPR `json:"pull_requests"`
		CheckSuite   *struct {
			HeadBranch string `json:"head_branch"`
		} `json:"check_suite"`
	} `json:"check_run"`
	CheckSuite *struct {
		HeadSHA      string   `json:"head_sha"`
		HeadBranch   string   `json:"head_branch"`
		PullRequests []hookPR `json:"pull_requests"`
	} `json:"check_suite"`
}

// ParseHook reads a relevant delivery's body into the pull requests it
// names. A body that is not a JSON object, or names none, is an error
// saying so.
func ParseHook(kind, event string, body []byte) (Hook, error) {
	var b hookBody
	if err := json.Unmarshal(body, &b); err != nil {
		return Hook{}, fmt.Errorf("the body of a %s %s delivery is not its JSON payload: %v", kind, event, err)
	}
	var h Hook
	add := func(number int, branch, sha string) {
		if number > 0 && !slices.Contains(h.Numbers, number) && len(h.Numbers) < MaxHookRefs {
			h.Numbers = append(h.Numbers, number)
		}
		if branch = strings.TrimPrefix(branch, "refs/heads/"); branch != "" && !slices.Contains(h.Branches, branch) && len(h.Branches) < MaxHookRefs {
			h.Branches = append(h.Branches, branch)
		}
		if sha != "" && !slices.Contains(h.SHAs, sha) && len(h.SHAs) < MaxHookRefs {
			h.SHAs = append(h.SHAs, sha)
		}
	}
	prs := func(list []hookPR) {
		for _, p := range list {
			add(p.Number, p.Head.Ref, p.Head.SHA)
		}
	}
	if b.PullRequest != nil {
		add(b.PullRequest.Number, b.PullRequest.Head.Ref, b.PullRequest.Head.SHA)
	} else if strings.HasPrefix(event, "pull_request") {
		add(b.Number, "", "")
	}
	if event == "status" {
		add(0, "", b.SHA)
		if b.Commit != nil {
			add(0, "", b.Commit.ID)
		}
		for _, br := range b.Branches {
			add(0, br.Name, "")
		}
	}
	if c := b.CheckRun; c != nil {
		add(0, "", c.HeadSHA)
		if c.CheckSuite != nil {
			add(0, c.CheckSuite.HeadBranch, "")
		}
		prs(c.PullRequests)
	}
	if c := b.CheckSuite; c != nil {
		add(0, c.HeadBranch, c.HeadSHA)
		prs(c.PullRequests)
	}
	if h.Empty() {
		return Hook{}, fmt.Errorf("the %s %s delivery names no pull request, branch or commit", kind, event)
	}
	return h, nil
}

// Names reports whether the hook names pr (by number, head branch or head
// commit).
func (h Hook) Names(pr PullRequest) bool {
	return (pr.Number > 0 && slices.Contains(h.Numbers, pr.Number)) || (pr.Branch != "" && slices.Contains(h.Branches, pr.Branch)) ||
		(pr.HeadSHA != "" && slices.Contains(h.SHAs, pr.HeadSHA))
}
