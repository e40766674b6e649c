package gitea

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/ballet/ballet/internal/fault"
	"github.com/ballet/ballet/internal/forge"
)

// Merge merges the pull request at pr.HeadSHA with a merge commit.
func (f *Forge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	if pr.Number <= 0 || pr.HeadSHA == "" {
		return fmt.Errorf("gitea: merge %s: the pull request's number and decided head commit are needed", pr.Branch)
	}
	t, err := f.target(repo)
	if err != nil {
		return err
	}
	call := fmt.Sprintf("merge pull request #%d", pr.Number)
	if err := needToken(t, call); err != nil {
		return err
	}
	fault.Hit(FaultMergeBefore)
	// The merge is not cut short by the caller's deadline: Gitea pushes the
	// merge commit to the base and then records the pull request merged,
	// and a request cancelled between the two leaves the commit on the base
	// and the pull request open. Options.MergeTimeout still bounds it.
	status, msg, err := f.merge(context.WithoutCancel(ctx), t, pr, "merge", pr.HeadSHA)
	if err != nil {
		return fmt.Errorf("gitea: %s in %s: %w", call, t.full, redact(err, t.token))
	}
	if status/100 == 2 {
		fault.Hit(FaultMergeAfter)
		return nil
	}
	err = &apiError{call: call, repo: t.full, status: status, err: redact(errors.New(msg), t.token)}
	if status != http.StatusMethodNotAllowed && status != http.StatusConflict && status != http.StatusNotFound {
		return err
	}
	// Refused: the pull request as it is now tells why.
	p, perr := f.pull(ctx, t, pr.Number)
	if perr != nil {
		return fmt.Errorf("%w (then: %v)", err, perr)
	}
	head, herr := f.headOf(ctx, t, p)
	if herr != nil {
		return fmt.Errorf("%w (then: %v)", err, herr)
	}
	switch {
	case p.HasMerged && head == pr.HeadSHA:
		return nil // merged before (by Ballet before a crash, or a person): done
	case p.HasMerged:
		return fmt.Errorf("%w: #%d was merged at %s, not at %s", forge.ErrOutOfDate, pr.Number, head, pr.HeadSHA)
	case p.State != sdk.StateOpen:
		return fmt.Errorf("%w: #%d is closed", forge.ErrNotMergeable, pr.Number)
	case head != pr.HeadSHA:
		return fmt.Errorf("%w: %s is at %s, not at %s: %v", forge.ErrOutOfDate, pr.Branch, head, pr.HeadSHA, err)
	}
	return fmt.Errorf("%w: %v", forge.ErrNotMergeable, err)
}

// merge sends the merge request itself: the SDK drops Gitea's answer, whose
// message says why a merge was refused. It returns the HTTP status and
// Gitea's message; err is a transport error or a rate limit.
func (f *Forge) merge(ctx context.Context, t target, pr forge.PullRequest, do, commit string) (int, string, error) {
	fields := map[string]string{"Do": do, "head_commit_id": commit}
	if do == "manually-merged" {
		fields = map[string]string{"Do": do, "merge_commit_id": commit}
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return 0, "", err
	}
	u := fmt.Sprintf("%s/api/v1/repos/%s/%s/pulls/%d/merge", t.base, url.PathEscape(t.owner), url.PathEscape(t.name), pr.Number)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "token "+t.token)
	resp, err := f.mergeHC.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if rl := forge.RateLimit(resp.StatusCode, resp.Header, f.clock.Now()); rl != nil {
		return 0, "", rl
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	msg := http.StatusText(resp.StatusCode)
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		msg = m.Message
	} else if s := strings.TrimSpace(string(b)); s != "" {
		msg = oneLine(s)
	}
	return resp.StatusCode, msg, nil
}
