// The pipeline model of internal/pipeline, as the API sends it, and the pure
// helpers of the editor: cleaning a definition for the API, resolving where
// an outcome leads, and mapping a problem's path to the form field it
// belongs to.

export type Outcome = "done" | "failed" | "blocked";
export const OUTCOMES: Outcome[] = ["done", "failed", "blocked"];
export const SPECIAL_TARGETS = ["$done", "$failed", "$question"] as const;
export const KINDS: [string, string][] = [
  ["agent", "agent session"],
  ["human", "human approval"],
  ["platform", "platform merge"],
];
export const ADAPTERS = ["claude-code", "opencode"];
export const DEFAULT_ADAPTER = "claude-code";
export const DEFAULT_MAX_ITERATIONS = 3;
export const MAX_MAX_ITERATIONS = 20;
export const MAX_TIMEOUT_MINUTES = 7 * 24 * 60;

export type Next = Partial<Record<Outcome, string>>;

export interface Stage {
  id: string;
  kind: string;
  name?: string;
  adapter?: string;
  model?: string;
  skills?: string[];
  knowledge?: string[]; // entries of the organization's knowledge: "slug" or "space:slug"
  instructions?: string;
  action?: string;
  timeout_minutes?: number;
  next?: Next;
}

export interface Definition {
  max_iterations?: number;
  stages: Stage[];
}

export interface Problem {
  code: string;
  path: string;
  message: string;
  line?: number;
  column?: number;
}

export interface PipelineVersion {
  project: string;
  name: string;
  version: number;
  definition: Definition;
  created_by: string;
  created_at?: string;
}

// clean leaves out what is not written (empty strings, empty lists, zero
// numbers), as the API and the canonical YAML do.
export function clean(d: Definition): Definition {
  const out: Definition = { stages: d.stages.map(cleanStage) };
  if (d.max_iterations) out.max_iterations = d.max_iterations;
  return out;
}

function cleanStage(s: Stage): Stage {
  const out: Stage = { id: s.id, kind: s.kind };
  for (const k of ["name", "adapter", "model", "instructions", "action"] as const) {
    if (s[k]) out[k] = s[k];
  }
  if (s.skills?.length) out.skills = s.skills;
  if (s.knowledge?.length) out.knowledge = s.knowledge;
  if (s.timeout_minutes) out.timeout_minutes = s.timeout_minutes;
  const next: Next = {};
  for (const o of OUTCOMES) if (s.next?.[o]) next[o] = s.next[o];
  if (Object.keys(next).length) out.next = next;
  return out;
}

// target resolves where outcome o of stage i leads (Definition.Target):
// what is written, else done → the next stage ($done after the last), the
// others → $question.
export function target(d: Definition, i: number, o: Outcome): string {
  const t = d.stages[i].next?.[o];
  if (t) return t;
  if (o !== "done") return "$question";
  return i + 1 < d.stages.length ? d.stages[i + 1].id : "$done";
}

// defaultTarget is where outcome o of stage i leads when nothing is written.
export function defaultTarget(d: Definition, i: number, o: Outcome): string {
  if (o !== "done") return "$question";
  return i + 1 < d.stages.length ? d.stages[i + 1].id : "$done";
}

// A stage's fields in the form; a problem's path maps to one of them, to
// the stage, to the stage list or to the whole pipeline.
const STAGE_FIELDS = new Set([
  "id", "kind", "name", "adapter", "model", "skills", "knowledge", "instructions", "action", "timeout_minutes",
  "next.done", "next.failed", "next.blocked",
]);

// fieldOf maps a problem's path ("stages[2].next.done",
// "stages[1].skills[0]") to the key of the form element showing it: a field
// ("stages[2].next.done"), a stage ("stages[2]"), "stages", "max_iterations"
// or "" (the pipeline as a whole).
export function fieldOf(path: string): string {
  if (path === "max_iterations" || path === "stages") return path;
  const m = /^stages\[(\d+)\](?:\.(.*))?$/.exec(path);
  if (!m) return "";
  const stage = `stages[${m[1]}]`;
  const rest = (m[2] ?? "").replace(/\[\d+\]$/, ""); // skills[0] → skills, knowledge[1] → knowledge
  return STAGE_FIELDS.has(rest) ? `${stage}.${rest}` : stage;
}

// problemsByField groups problems by fieldOf their path.
export function problemsByField(ps: Problem[]): Map<string, Problem[]> {
  const out = new Map<string, Problem[]>();
  for (const p of ps) {
    const k = fieldOf(p.path);
    out.set(k, [...(out.get(k) ?? []), p]);
  }
  return out;
}

// charColumn converts a 1-based column counted in UTF-8 bytes (as the API
// reports it) into a 0-based offset in the UTF-16 text of the line.
export function charColumn(line: string, byteColumn: number): number {
  let bytes = 0;
  let i = 0;
  while (i < line.length && bytes < byteColumn - 1) {
    const c = line.codePointAt(i)!;
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    i += c >= 0x10000 ? 2 : 1;
  }
  return i;
}

// newStageID returns an id not used in d ("stage-N").
export function newStageID(d: Definition): string {
  for (let n = d.stages.length + 1; ; n++) {
    const id = `stage-${n}`;
    if (!d.stages.some((s) => s.id === id)) return id;
  }
}

// withKind changes a stage's kind, dropping the fields the new kind does not
// take (a merge stage gets its one action).
export function withKind(s: Stage, kind: string): Stage {
  const out: Stage = { id: s.id, kind, name: s.name, next: s.next };
  if (kind === "agent") {
    const { adapter, model, skills, knowledge, instructions, timeout_minutes } = s;
    Object.assign(out, { adapter, model, skills, knowledge, instructions, timeout_minutes });
  }
  if (kind === "platform") out.action = s.action || "merge";
  return out;
}

// parseList reads a list field (skills, knowledge): names separated by
// commas.
export function parseList(text: string): string[] {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}
