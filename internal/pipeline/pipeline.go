// Package pipeline is the pure model of a project's pipeline (ADR-0017:
// Pipelines Defined per Project): the Definition and its stages, parsing it
// from YAML (Parse) or from the REST API's JSON (DecodeJSON), validating it
// (Validate), rendering it as canonical YAML (Render), Ballet's Template, and
// the resolution of where an outcome leads (Definition.Target), which the flow
// engine follows.
//
// A Definition keeps what the user wrote apart from the defaults: a zero
// MaxIterations, an empty Adapter, TimeoutMinutes or Next entry mean "not
// written", so Render never spells out a default the user did not write. The
// accessors (MaxIter, Stage.AdapterOrDefault, Stage.Timeout, Target) resolve
// the defaults of the specification.
//
// Problems are reported all at once, each with a stable Code, the Path of the
// offending value (stages[2].next.done) and, when parsed from YAML, its Line
// and Column. The package does no I/O: no storage, no HTTP.
package pipeline

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Stage kinds.
const (
	KindAgent    = "agent"    // a coding agent session
	KindHuman    = "human"    // a human approves (done) or rejects (failed)
	KindPlatform = "platform" // Ballet acts on the forge (action: merge)
)

// Adapters: the runtime of an agent stage.
const (
	AdapterClaudeCode = "claude-code"
	AdapterOpenCode   = "opencode"
	// DefaultAdapter is the adapter of an agent stage that names none.
	DefaultAdapter = AdapterClaudeCode
)

// ActionMerge is the action of a platform stage: open the pull request if
// needed, wait for checks and approvals, merge when the policy allows.
const ActionMerge = "merge"

// Outcomes of a stage.
const (
	OutcomeDone    = "done"
	OutcomeFailed  = "failed"
	OutcomeBlocked = "blocked"
)

// Special targets of an outcome (besides a stage id).
const (
	TargetDone     = "$done"     // the ticket is done
	TargetFailed   = "$failed"   // the flow fails, the ticket pauses
	TargetQuestion = "$question" // ask the planner and humans, then resume the stage
)

// Limits and defaults.
const (
	// DefaultMaxIterations is the loop limit of a definition that sets none
	// (the template's value).
	DefaultMaxIterations = 3
	// MinMaxIterations and MaxMaxIterations bound max_iterations.
	MinMaxIterations = 1
	MaxMaxIterations = 20
	// MaxTimeoutMinutes bounds timeout_minutes (one week).
	MaxTimeoutMinutes = 7 * 24 * 60
	// DefaultTimeout is a stage's timeout when timeout_minutes is 0.
	DefaultTimeout = 2 * time.Hour

	// MaxStages bounds the stages of a pipeline: a ticket goes through
	// every one of them, each a session, an approval or a merge.
	MaxStages = 100
	// MaxSkills bounds the skills one stage lists (none: every project
	// skill).
	MaxSkills = 100
	// MaxKnowledge bounds the knowledge entries one stage names: each is
	// fetched when the stage's run is created and goes whole into its
	// prompt (MaxKnowledgeLength bounds a slug, in bytes).
	MaxKnowledge       = 10
	MaxKnowledgeLength = 200
	// MaxNameLength and MaxModelLength bound a stage's name and model, and
	// MaxSkillLength a skill name, in characters (a project skill's name
	// has at most 64).
	MaxNameLength  = 200
	MaxModelLength = 200
	MaxSkillLength = 64
	// MaxInstructionsBytes bounds a stage's instructions (as much as an
	// item's description).
	MaxInstructionsBytes = 64 << 10

	// MaxProblems bounds the problems reported at once; one more, the last
	// (CodeTooManyProblems), says how many were left out.
	MaxProblems = 100
)

// Outcomes lists the outcomes in their canonical order.
func Outcomes() []string { return []string{OutcomeDone, OutcomeFailed, OutcomeBlocked} }

var idRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// knowledgeRE is a knowledge reference: an entry's path-like slug
// (lowercase segments of letters, digits, ".", "_" and "-", separated by
// "/"), in the organization's default space, or "space:slug" for another
// space (1–40 lowercase letters, digits or "-", not starting or ending
// with "-"): the Knowledge service's own syntax.
var knowledgeRE = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?:)?[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*$`)

// KnowledgeRef splits a reference of a stage's knowledge list into its
// space ("" for the default space) and slug.
func KnowledgeRef(ref string) (space, slug string) {
	if sp, sl, ok := strings.Cut(ref, ":"); ok {
		return sp, sl
	}
	return "", ref
}

// Definition is one version of a pipeline.
type Definition struct {
	// MaxIterations bounds how often a ticket may go back to an earlier
	// stage (1–20); 0 means not written, i.e. DefaultMaxIterations.
	MaxIterations int     `json:"max_iterations,omitempty"`
	Stages        []Stage `json:"stages"`
}

// Stage is one step of a pipeline. Empty fields are "not written": their
// defaults are resolved by the accessors, not stored.
type Stage struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Kind string `json:"kind"` // KindAgent, KindHuman or KindPlatform
	// Agent stages only.
	Adapter string   `json:"adapter,omitempty"` // "" = DefaultAdapter
	Model   string   `json:"model,omitempty"`
	Skills  []string `json:"skills,omitempty"` // empty: every project skill
	// Knowledge names entries of the organization's knowledge ("slug" in
	// the default space, "space:slug" in another) that the run's prompt
	// carries, fetched when the run is created.
	Knowledge    []string `json:"knowledge,omitempty"`
	Instructions string   `json:"instructions,omitempty"`
	// Platform stages only.
	Action string `json:"action,omitempty"` // ActionMerge
	// TimeoutMinutes bounds an agent stage's run without progress; 0 means
	// DefaultTimeout.
	TimeoutMinutes int  `json:"timeout_minutes,omitempty"`
	Next           Next `json:"next,omitzero"`
}

// Next says where each outcome leads: a stage id, TargetDone, TargetFailed
// or TargetQuestion. An empty entry takes the default (see
// Definition.Target).
type Next struct {
	Done    string `json:"done,omitempty"`
	Failed  string `json:"failed,omitempty"`
	Blocked string `json:"blocked,omitempty"`
}

// Get returns the entry written for outcome ("" when none or unknown).
func (n Next) Get(outcome string) string {
	switch outcome {
	case OutcomeDone:
		return n.Done
	case OutcomeFailed:
		return n.Failed
	case OutcomeBlocked:
		return n.Blocked
	}
	return ""
}

// IsZero reports whether no entry is written.
func (n Next) IsZero() bool { return n == Next{} }

// MaxIter returns the loop limit, resolving the default.
func (d Definition) MaxIter() int {
	if d.MaxIterations == 0 {
		return DefaultMaxIterations
	}
	return d.MaxIterations
}

// Index returns the position of the first stage with id, or -1.
func (d Definition) Index(id string) int {
	for i, s := range d.Stages {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// Stage returns the stage with id.
func (d Definition) Stage(id string) (Stage, bool) {
	if i := d.Index(id); i >= 0 {
		return d.Stages[i], true
	}
	return Stage{}, false
}

// First returns the stage where tickets start.
func (d Definition) First() (Stage, bool) {
	if len(d.Stages) == 0 {
		return Stage{}, false
	}
	return d.Stages[0], true
}

// Target returns where outcome of stage stageID leads, resolving the
// defaults: done → the next stage in order ($done after the last); failed
// and blocked → $question. The result is a stage id, TargetDone,
// TargetFailed or TargetQuestion (for a definition that validates clean).
func (d Definition) Target(stageID, outcome string) (string, error) {
	i := d.Index(stageID)
	if i < 0 {
		return "", fmt.Errorf("pipeline: no stage %q", stageID)
	}
	return d.target(i, outcome)
}

func (d Definition) target(i int, outcome string) (string, error) {
	switch outcome {
	case OutcomeDone, OutcomeFailed, OutcomeBlocked:
	default:
		return "", fmt.Errorf("pipeline: unknown outcome %q (want done, failed or blocked)", outcome)
	}
	if t := d.Stages[i].Next.Get(outcome); t != "" {
		return t, nil
	}
	if outcome != OutcomeDone {
		return TargetQuestion, nil
	}
	if i+1 < len(d.Stages) {
		return d.Stages[i+1].ID, nil
	}
	return TargetDone, nil
}

// AdapterOrDefault returns the stage's adapter, DefaultAdapter for an agent
// stage that names none ("" for other kinds).
func (s Stage) AdapterOrDefault() string {
	if s.Adapter == "" && s.Kind == KindAgent {
		return DefaultAdapter
	}
	return s.Adapter
}

// Timeout returns the stage's timeout, DefaultTimeout when none is written
// (at most MaxTimeoutMinutes, even for a definition that does not validate).
func (s Stage) Timeout() time.Duration {
	switch {
	case s.TimeoutMinutes <= 0:
		return DefaultTimeout
	case s.TimeoutMinutes > MaxTimeoutMinutes:
		return MaxTimeoutMinutes * time.Minute
	}
	return time.Duration(s.TimeoutMinutes) * time.Minute
}

// IsSpecialTarget reports whether t is $done, $failed or $question.
func IsSpecialTarget(t string) bool {
	return t == TargetDone || t == TargetFailed || t == TargetQuestion
}

// ValidName checks a pipeline's name: "default" or a ticket type
// ([a-z][a-z0-9_-]{0,31}, except "epic", which is not a ticket type).
func ValidName(name string) error {
	switch {
	case name == "default":
		return nil
	case name == "epic":
		return fmt.Errorf("pipeline name %q is not allowed: epics are not tickets and have no pipeline", name)
	case !idRE.MatchString(name):
		return fmt.Errorf("pipeline name %q is invalid: use \"default\" or a ticket type (a lowercase letter, then up to 31 lowercase letters, digits, \"_\" or \"-\")", name)
	}
	return nil
}
