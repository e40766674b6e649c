package pipeline

import (
	"strings"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/text"
)

// Validate checks a definition against the rules of the specification and
// returns every problem, ordered by path:
//
//   - max_iterations outside 1–20 (0 is "not written": the default 3);
//   - no stages;
//   - a missing, invalid or duplicate stage id;
//   - a missing or unknown kind, an unknown adapter or action, a platform
//     stage without action;
//   - fields that do not belong to the stage's kind: adapter, model, skills,
//     knowledge, instructions and timeout_minutes belong to agent stages,
//     action to platform stages;
//   - a knowledge entry that is not a slug (or space:slug), or is listed
//     twice;
//   - a negative timeout_minutes (or one above a week), an empty or repeated
//     skill, a string that is not valid UTF-8 or holds control characters
//     (package text: instructions may hold line feeds and tabs);
//   - more than MaxStages stages (nothing else is checked then), more than
//     MaxSkills skills or MaxKnowledge knowledge entries on a stage, a name,
//     model, skill, knowledge entry or instructions beyond its length limit;
//   - a next entry that leads to neither a stage id nor $done, $failed or
//     $question;
//   - stages that can never be reached from the first one, following every
//     outcome's resolved target;
//   - a pipeline whose first stage can never reach $done, and reachable stages
//     from which $done can no longer be reached.
//
// The graph checks run only when ids and targets are sound, so that one
// typo is not reported three times. At most MaxProblems problems are
// returned, then one saying how many more there are. Validate takes time
// linear in the size of d.
func Validate(d Definition) []Problem { return limitProblems(validate(d)) }

// validate returns Validate's problems, neither ordered nor limited.
func validate(d Definition) []Problem {
	var ps []Problem
	add := func(p Problem) { ps = append(ps, p) }
	if d.MaxIterations != 0 && (d.MaxIterations < MinMaxIterations || d.MaxIterations > MaxMaxIterations) {
		add(problemf(CodeMaxIterationsRange, "max_iterations", "max_iterations is %d; it must be between %d and %d", d.MaxIterations, MinMaxIterations, MaxMaxIterations))
	}
	switch {
	case len(d.Stages) == 0:
		add(problemf(CodeEmptyPipeline, "stages", "the pipeline has no stages; it needs at least one"))
		return ps
	case len(d.Stages) > MaxStages:
		return append(ps, tooManyStages(len(d.Stages)))
	}

	graphOK := true
	first := map[string]int{} // id → index of its first stage
	for i, s := range d.Stages {
		p := stagePath(i)
		if !utf8.ValidString(s.ID) {
			add(problemf(CodeInvalidText, p+".id", "the stage id is not valid UTF-8 text"))
			graphOK = false
			continue
		}
		switch j, dup := first[s.ID]; {
		case s.ID == "":
			add(problemf(CodeMissingField, p+".id", "stage %d has no id", i+1))
			graphOK = false
		case dup:
			add(problemf(CodeDuplicateID, p+".id", "stage id %s is already used by stages[%d]; stage ids must be unique", short(s.ID), j))
			graphOK = false
		default:
			first[s.ID] = i
			if !idRE.MatchString(s.ID) {
				add(problemf(CodeInvalidID, p+".id", "stage id %s is invalid: it must be a lowercase letter followed by up to 31 lowercase letters, digits, \"_\" or \"-\"", short(s.ID)))
			}
		}
	}

	for i, s := range d.Stages {
		p := stagePath(i)
		name := stageName(s, i)
		texts := []struct{ field, value string }{
			{"name", s.Name}, {"kind", s.Kind}, {"adapter", s.Adapter}, {"model", s.Model},
			{"instructions", s.Instructions}, {"action", s.Action},
			{"next.done", s.Next.Done}, {"next.failed", s.Next.Failed}, {"next.blocked", s.Next.Blocked},
		}
		badText := map[string]bool{}
		for _, t := range texts {
			check := text.Line
			if t.field == "instructions" {
				check = text.Multiline
			}
			if err := check(t.value); err != nil {
				add(problemf(CodeInvalidText, p+"."+t.field, "%s of %s %v", t.field, name, err))
				badText[t.field] = true
			}
		}
		skillsOK := len(s.Skills) <= MaxSkills
		if !skillsOK {
			add(tooManySkills(p+".skills", len(s.Skills)))
		}
		for j, sk := range s.Skills {
			if !skillsOK {
				break
			}
			if err := text.Line(sk); err != nil {
				add(problemf(CodeInvalidText, p+".skills["+itoa(j)+"]", "a skill of %s %v", name, err))
				badText["skills"] = true
			} else if n := utf8.RuneCountInString(sk); n > MaxSkillLength {
				add(problemf(CodeTextTooLong, p+".skills["+itoa(j)+"]", "skill %d of %s is %d characters long; a skill name has at most %d", j+1, name, n, MaxSkillLength))
			}
		}
		knowledgeOK := len(s.Knowledge) <= MaxKnowledge
		if !knowledgeOK {
			add(tooManyKnowledge(p+".knowledge", len(s.Knowledge)))
		}
		for j, k := range s.Knowledge {
			if !knowledgeOK {
				break
			}
			if err := text.Line(k); err != nil {
				add(problemf(CodeInvalidText, p+".knowledge["+itoa(j)+"]", "a knowledge entry of %s %v", name, err))
				badText["knowledge"] = true
			} else if len(k) > MaxKnowledgeLength {
				add(problemf(CodeTextTooLong, p+".knowledge["+itoa(j)+"]", "knowledge entry %d of %s is %d bytes long; at most %d are allowed", j+1, name, len(k), MaxKnowledgeLength))
				badText["knowledge"] = true
			}
		}
		for _, t := range []struct {
			field, value string
			max          int
		}{{"name", s.Name, MaxNameLength}, {"model", s.Model, MaxModelLength}} {
			if n := utf8.RuneCountInString(t.value); n > t.max && !badText[t.field] {
				add(problemf(CodeTextTooLong, p+"."+t.field, "%s of %s is %d characters long; at most %d are allowed", t.field, name, n, t.max))
			}
		}
		if len(s.Instructions) > MaxInstructionsBytes && !badText["instructions"] {
			add(problemf(CodeTextTooLong, p+".instructions", "instructions of %s are %d bytes long; at most %d (%d KiB) are allowed", name, len(s.Instructions), MaxInstructionsBytes, MaxInstructionsBytes>>10))
		}

		notAllowed := func(field string, written bool) {
			if written {
				add(problemf(CodeFieldNotAllowed, p+"."+field, "%s is not allowed on %s, which is %s stage; %s", field, name, article(s.Kind), belongs[field]))
			}
		}
		switch s.Kind {
		case "":
			add(problemf(CodeMissingField, p+".kind", "%s has no kind; use agent, human or platform", name))
		case KindAgent:
			switch s.Adapter {
			case "", AdapterClaudeCode, AdapterOpenCode:
			default:
				if !badText["adapter"] {
					add(problemf(CodeUnknownAdapter, p+".adapter", "adapter %s of %s is unknown; use claude-code (the default) or opencode", short(s.Adapter), name))
				}
			}
			notAllowed("action", s.Action != "")
			if skillsOK {
				checkSkills(&ps, p, name, s.Skills, badText["skills"])
			}
			if knowledgeOK && !badText["knowledge"] {
				checkKnowledge(&ps, p, name, s.Knowledge)
			}
			if s.TimeoutMinutes < 0 || s.TimeoutMinutes > MaxTimeoutMinutes {
				add(problemf(CodeInvalidTimeout, p+".timeout_minutes", "timeout_minutes of %s is %d; it must be between 1 and %d, or 0 for the default (two hours)", name, s.TimeoutMinutes, MaxTimeoutMinutes))
			}
		case KindHuman, KindPlatform:
			notAllowed("adapter", s.Adapter != "")
			notAllowed("model", s.Model != "")
			notAllowed("skills", len(s.Skills) > 0)
			notAllowed("knowledge", len(s.Knowledge) > 0)
			notAllowed("instructions", s.Instructions != "")
			notAllowed("timeout_minutes", s.TimeoutMinutes != 0)
			if s.Kind == KindHuman {
				notAllowed("action", s.Action != "")
				break
			}
			switch s.Action {
			case "":
				add(problemf(CodeMissingField, p+".action", "%s is a platform stage without action; use action: merge", name))
			case ActionMerge:
			default:
				if !badText["action"] {
					add(problemf(CodeUnknownAction, p+".action", "action %s of %s is unknown; use merge", short(s.Action), name))
				}
			}
		default:
			if !badText["kind"] {
				add(problemf(CodeUnknownKind, p+".kind", "kind %s of %s is unknown; use agent, human or platform", short(s.Kind), name))
			}
		}

		for _, o := range Outcomes() {
			t := s.Next.Get(o)
			if t == "" || IsSpecialTarget(t) {
				continue
			}
			if badText["next."+o] {
				graphOK = false
				continue
			}
			if _, ok := first[t]; ok {
				continue
			}
			graphOK = false
			if strings.HasPrefix(t, "$") {
				add(problemf(CodeUnknownTarget, p+".next."+o, "%s of %s leads to %s, which is unknown; the special targets are $done, $failed and $question", o, name, short(t)))
			} else {
				add(problemf(CodeUnknownTarget, p+".next."+o, "%s of %s leads to %s, which is neither a stage id nor $done, $failed or $question", o, name, short(t)))
			}
		}
	}

	if graphOK {
		ps = append(ps, checkGraph(d, first)...)
	}
	return ps
}

func tooManySkills(path string, n int) Problem {
	return problemf(CodeTooManySkills, path, "%s lists %d skills; at most %d are allowed (list none for every project skill)", path, n, MaxSkills)
}

func tooManyKnowledge(path string, n int) Problem {
	return problemf(CodeTooManyKnowledge, path, "%s names %d knowledge entries; at most %d are allowed (the agent finds more with search_knowledge)", path, n, MaxKnowledge)
}

func tooManyStages(n int) Problem {
	return problemf(CodeTooManyStages, "stages", "the pipeline has %d stages; at most %d are allowed", n, MaxStages)
}

var belongs = map[string]string{
	"adapter":         "adapter belongs to agent stages",
	"model":           "model belongs to agent stages",
	"skills":          "skills belong to agent stages",
	"knowledge":       "knowledge belongs to agent stages",
	"instructions":    "instructions belong to agent stages",
	"timeout_minutes": "timeout_minutes belongs to agent stages",
	"action":          "action belongs to platform stages",
}

func checkSkills(ps *[]Problem, p, name string, skills []string, badText bool) {
	seen := map[string]bool{}
	for j, sk := range skills {
		sp := p + ".skills[" + itoa(j) + "]"
		switch {
		case strings.TrimSpace(sk) == "":
			*ps = append(*ps, problemf(CodeInvalidSkill, sp, "skill %d of %s is empty; name a project skill", j+1, name))
		case seen[sk]:
			*ps = append(*ps, problemf(CodeDuplicateSkill, sp, "skill %s is listed twice in %s", short(sk), name))
		}
		if !badText {
			seen[sk] = true
		}
	}
}

// checkKnowledge reports knowledge entries that are not [space:]slug and
// entries listed twice (the text of each is sound).
func checkKnowledge(ps *[]Problem, p, name string, refs []string) {
	seen := map[string]bool{}
	for j, k := range refs {
		kp := p + ".knowledge[" + itoa(j) + "]"
		switch {
		case !knowledgeRE.MatchString(k):
			*ps = append(*ps, problemf(CodeInvalidKnowledge, kp, "knowledge entry %s of %s is not an entry's slug: write lowercase "+
				"segments of letters, digits, \".\", \"_\" and \"-\" separated by \"/\" (conventions/go), optionally after a space (lowercase letters, digits and \"-\") and \":\" (ops:deploy)", short(k), name))
		case seen[k]:
			*ps = append(*ps, problemf(CodeDuplicateKnowledge, kp, "knowledge entry %s is listed twice in %s", short(k), name))
		}
		seen[k] = true
	}
}

// checkGraph reports unreachable stages and missing paths to $done; every id
// is unique and every target known. Both searches visit each stage and each
// outcome once.
func checkGraph(d Definition, index map[string]int) []Problem {
	n := len(d.Stages)
	succ := make([][]int, n)
	pred := make([][]int, n)
	var toDone []int
	for i := range d.Stages {
		for _, o := range Outcomes() {
			t, _ := d.target(i, o)
			if t == TargetDone {
				toDone = append(toDone, i)
			} else if j, ok := index[t]; ok {
				succ[i] = append(succ[i], j)
				pred[j] = append(pred[j], i)
			}
		}
	}
	// Forward: reachable from the first stage.
	reached := make([]bool, n)
	reached[0] = true
	search(succ, reached, []int{0})
	// Backward: stages from which $done can be reached.
	good := make([]bool, n)
	for _, i := range toDone {
		good[i] = true
	}
	search(pred, good, toDone)

	var ps []Problem
	firstName := stageName(d.Stages[0], 0)
	for i, s := range d.Stages {
		if !reached[i] {
			ps = append(ps, problemf(CodeUnreachableStage, stagePath(i), "%s can never be reached: no outcome of any stage reachable from the first stage %s leads to it", stageName(s, i), short(d.Stages[0].ID)))
		}
	}
	if !good[0] {
		ps = append(ps, problemf(CodeNoPathToDone, "stages", "the pipeline can never reach $done: no path from the first stage, %s, leads to $done", firstName))
		return ps
	}
	for i, s := range d.Stages {
		if reached[i] && !good[i] {
			ps = append(ps, problemf(CodeNoPathToDone, stagePath(i), "once a ticket enters %s it can never reach $done: no path from it leads to $done", stageName(s, i)))
		}
	}
	return ps
}

// search marks every node reachable from queue along edges (breadth
// first); the nodes in queue are marked already.
func search(edges [][]int, marked []bool, queue []int) {
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, j := range edges[i] {
			if !marked[j] {
				marked[j] = true
				queue = append(queue, j)
			}
		}
	}
}

// stageName names a stage in messages: `stage "review"`, or by position
// when it has no usable id.
func stageName(s Stage, i int) string {
	if s.ID != "" && utf8.ValidString(s.ID) {
		return "stage " + short(s.ID)
	}
	return "stage " + itoa(i+1)
}

func article(kind string) string {
	if kind == KindAgent {
		return "an agent"
	}
	return "a " + kind
}
