// Typed helpers for Ballet's REST API (docs/api.md). Every request is
// same-origin with the session cookie; an error carries the API's own
// message, and a 401 sends the browser to the sign-in page.
import { navigate } from "./router";

export interface FieldProblem {
  field?: string;
  path?: string;
  message: string;
  line?: number;
  column?: number;
  code?: string;
}

// ApiError is an answer other than 2xx, in the API's one error shape.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: FieldProblem[] = [],
  ) {
    super(message);
  }
  // full is the message with each field problem, for people.
  get full(): string {
    const more = this.details
      .map((d) => (d.field || d.path ? `${d.field ?? d.path}: ` : "") + d.message)
      .filter((d) => !this.message.includes(d));
    return more.length ? `${this.message}: ${more.join("; ")}` : this.message;
  }
}

// signInPath is where a signed-out browser goes, coming back to here after.
export function signInPath(): string {
  const here = location.pathname + location.search + location.hash;
  return here.startsWith("/signin") ? "/signin" : "/signin?next=" + encodeURIComponent(here);
}

// unauthorized runs when the API answers 401: session.ts forgets the session
// (and the shell then goes to the sign-in page).
let unauthorized = () => navigate(signInPath(), true);
export function onUnauthorized(fn: () => void) {
  unauthorized = fn;
}

export interface RequestOptions {
  // quiet401: a 401 is the caller's to handle (the session check, the sign-in form).
  quiet401?: boolean;
}

export async function request<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "network", `Ballet cannot be reached (${(e as Error).message}).`);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: any = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
  }
  if (!res.ok) {
    const e = data?.error;
    const err = new ApiError(res.status, e?.code ?? "http_" + res.status, e?.message ?? `${res.status} ${res.statusText}`, e?.details ?? []);
    if (res.status === 401 && !opts.quiet401) unauthorized();
    throw err;
  }
  return data as T;
}

export const get = <T>(path: string, opts?: RequestOptions) => request<T>("GET", path, undefined, opts);
export const post = <T>(path: string, body?: unknown, opts?: RequestOptions) => request<T>("POST", path, body, opts);
export const patch = <T>(path: string, body: unknown) => request<T>("PATCH", path, body);
export const del = <T>(path: string) => request<T>("DELETE", path);

// enc escapes one path segment.
export const enc = encodeURIComponent;

// --- The API's shapes (the fields the UI reads) ---

export interface Session {
  subject: string;
  name: string;
  kind: string;
  platform_admin: boolean;
  expires_at: string | null; // null: the credential does not expire
}

export interface Organization {
  id: string;
  slug: string;
  name: string;
  version: number;
}

export interface Repository {
  forge: string;
  url: string;
  default_branch: string;
  credentials_ref: string;
  api_url?: string;
  webhook_secret_ref?: string;
}

export interface MergePolicy {
  mode: string;
  required_approvals: number;
  required_checks: string[] | null;
}

export interface Project {
  id: string;
  organization_id: string;
  key: string;
  name: string;
  repository: Repository | null;
  merge_policy: MergePolicy;
  concurrency_limit: number;
  budgets: { per_ticket_usd: number | null; per_day_usd: number | null };
  ticket_types: string[];
  paused: boolean;
  version: number;
}

export interface ItemFlow {
  stage: string;
  status: string;
  waiting: string;
  attention: string;
  cost_usd?: number; // what the ticket's runs cost so far
  until?: string; // waiting for the provider: when its limit is expected to have passed
}

export interface Item {
  id: string;
  key: string;
  project_id: string;
  number: number;
  type: string;
  title: string;
  description: string;
  acceptance_criteria: string;
  epic: string | null;
  state: string;
  blocked_by: string[] | null;
  blocks: string[] | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  version: number;
  flow?: ItemFlow | null;
  // start: what keeps a ready ticket from starting now, or would make its
  // flow wait (GET /items/{item} only), each hold with its code and a
  // sentence (docs/api.md).
  start?: { holds: StartHold[] };
}

export interface StartHold {
  code: string;
  message: string;
}

export interface Flow {
  ticket: string;
  pipeline: string;
  pipeline_version: number;
  stages: { id: string; name?: string; kind: string }[];
  stage: string;
  iteration: number;
  max_iterations: number;
  status: string;
  waiting?: string;
  run?: string;
  outcome?: string;
  report?: string;
  attention?: string;
  // branch_ahead: commits the ticket's branch had ahead of its base after
  // the last agent stage (absent: not known); nothing_to_approve: it waits
  // for an approval on a branch with none.
  branch_ahead?: number;
  nothing_to_approve?: boolean;
  started_at: string;
  updated_at: string;
  version: number;
  // escalated_at: the approval it waits for was escalated to the project's
  // admins then (absent: not escalated).
  escalated_at?: string;
  // until: waiting for the provider (a rate limit, an overload, a quota),
  // when the limit is expected to have passed and the stage runs again.
  until?: string;
}

export interface Question {
  id: string;
  item: string;
  text: string;
  blocking: boolean;
  asked_by: { kind: string; subject: string };
  asked_at: string;
  answer: string | null;
  answered_by: string | null;
  answered_at: string | null;
  escalated_at: string | null; // escalated to the project's admins, still open after escalate_after
}

// Subscription is the caller's subscription to a ticket.
export interface Subscription {
  item: string;
  subscribed: boolean;
  created_at: string | null;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  cost_usd: number;
}

export interface Run {
  id: string;
  stage: string;
  iteration: number;
  adapter: string;
  model: string;
  stage_model: string;
  status: string;
  // reason: why an interrupted run was interrupted (runner_restart, …); "" otherwise.
  reason: string;
  outcome: string;
  report: string;
  error: string;
  usage: Usage;
  created_at: string;
  started_at?: string;
  finished_at?: string;
}

// TranscriptEntry is one step of a session (GET /runs/{run}/transcript).
export interface TranscriptEntry {
  kind: "text" | "tool_call" | "tool_result" | "question" | "report" | "usage";
  time: string | null;
  text?: string;
  tool?: string;
  id?: string;
  input?: string;
  is_error?: boolean;
  outcome?: string;
  blocking?: boolean;
  model?: string;
  usage?: Usage;
  cut?: boolean;
}

export interface Transcript {
  entries: TranscriptEntry[];
  truncated: boolean;
  log_truncated: boolean;
  finished: boolean;
}

// Changes is what a ticket's branch changes against its base (GET
// /items/{item}/changes): head is what an approval names ("" when the
// branch was not pushed).
export interface Changes {
  branch: string;
  base: string;
  base_sha: string;
  head: string;
  ahead: number;
  commits: BranchCommit[];
  commits_truncated: boolean;
  files: ChangedFile[];
  files_truncated: boolean;
  note?: string;
  pull_request?: BranchPull;
}

export interface BranchCommit {
  sha: string;
  title: string;
  author: string;
  time: string;
  stage?: string; // made by Ballet's runner in this stage's run
  run?: string;
}

export interface ChangedFile {
  path: string;
  previous_path?: string;
  status: string;
  additions: number;
  deletions: number;
  binary?: boolean;
  patch: string; // the unified diff's hunks, from the first "@@"
  truncated: boolean;
}

export interface BranchPull {
  number: number;
  url: string;
  state: string;
  mergeable: boolean | null;
  checks: { name: string; state: string; url?: string }[];
  reviews: { reviewer: string; state: string; stale: boolean; url?: string }[];
}

export interface LogChunk {
  offset: number;
  next_offset: number;
  data: string;
  truncated: boolean;
  finished: boolean;
}

export interface BalletEvent {
  seq: number;
  id: string;
  occurred_at: string;
  entity_type: string;
  type: string;
  actor_kind: string;
  actor_sub: string;
  acting_for: string;
  payload: Record<string, any>;
}

export interface Amount {
  limit_usd: number | null;
  spent_usd: number;
  remaining_usd: number | null;
  input_tokens: number;
  output_tokens: number;
  runs: number;
}

export interface ProjectBudget {
  project: string;
  per_ticket_usd: number | null;
  today: Amount;
  day: string;
  timezone: string;
}

export interface Platform {
  paused: boolean;
  concurrency_limit: number;
  updated_at: string;
  version: number;
}

export interface Runner {
  id: string;
  name: string;
  labels: Record<string, string> | null;
  capacity: number;
  adapters: { name: string; version: string }[] | null;
  version: string;
  problem: string;
  draining: boolean; // the runner's own word: it is stopping
  drained: boolean; // a platform admin drained it: no new run until undrained
  drained_at?: string;
  drained_by?: string;
  sessions: string[] | null;
  alive: boolean;
  last_seen_at: string;
}

export interface NeedsMeEntry {
  kind: string;
  org: string;
  project: string;
  item: string;
  title: string;
  since: string;
  detail: string;
  question?: { id: string; text: string };
  stage?: string;
  webhook?: string; // webhook_failing: the hook's id
}

// MailAttention is GET /api/v1/platform/mail: mail deliveries by status
// and the latest failure.
export interface MailAttention {
  pending: number;
  retrying: number;
  failed: number;
  sent: number;
  failing: boolean;
  last_error: string | null;
  last_error_at: string | null;
}

// listItems reads every item of a project (pages of 200) matching the filters.
export async function listItems(project: string, filters: Record<string, string> = {}): Promise<Item[]> {
  const out: Item[] = [];
  let after = 0;
  for (;;) {
    const q = new URLSearchParams({ ...filters, after: String(after), limit: "200" });
    const page = await get<{ items: Item[]; next_after: number | null }>(`/api/v1/projects/${enc(project)}/items?${q}`);
    out.push(...page.items);
    if (page.next_after == null) return out;
    after = page.next_after;
  }
}

// listEvents reads an item's events after seq (pages of 1000).
export async function listEvents(item: string, after = 0): Promise<{ events: BalletEvent[]; last_seq: number }> {
  const events: BalletEvent[] = [];
  for (;;) {
    const page = await get<{ events: BalletEvent[]; last_seq: number }>(`/api/v1/items/${enc(item)}/events?after=${after}&limit=1000`);
    events.push(...page.events);
    if (page.events.length < 1000) return { events, last_seq: page.last_seq };
    after = page.last_seq;
  }
}

// permissions reads the caller's permissions in a project.
export async function permissions(project: string): Promise<Set<string>> {
  const p = await get<{ permissions: string[] }>(`/api/v1/projects/${enc(project)}/permissions`);
  return new Set(p.permissions);
}

// --- A ticket's calls (the ticket page's; docs/api.md) ---

const itemPath = (key: string) => `/api/v1/items/${enc(key)}`;

export const tickets = {
  get: (key: string) => get<Item>(itemPath(key)),
  // flow is the ticket's flow; null when it never started (404).
  flow: (key: string) =>
    get<Flow>(itemPath(key) + "/flow").catch((e) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }),
  questions: (key: string) => get<{ questions: Question[] }>(itemPath(key) + "/questions").then((r) => r.questions),
  runs: (key: string) => get<{ runs: Run[] }>(itemPath(key) + "/runs").then((r) => r.runs),
  move: (it: Item, state: string) => patch<Item>(itemPath(it.key), { version: it.version, state }),
  start: (key: string) => post<Flow>(itemPath(key) + "/flow/start"),
  // decide approves or rejects the human stage, naming the branch head
  // the person saw ("" when there is no branch): Core refuses with 409 a
  // head the branch has moved from.
  decide: (key: string, verb: "approve" | "reject", head: string, comment: string) =>
    post<Flow>(itemPath(key) + "/flow/" + verb, comment.trim() ? { head, comment } : { head }),
  changes: (key: string) => get<Changes>(itemPath(key) + "/changes"),
  addBlocker: (key: string, blocker: string) => post<unknown>(itemPath(key) + "/blockers/" + enc(blocker)),
  removeBlocker: (key: string, blocker: string) => del<void>(itemPath(key) + "/blockers/" + enc(blocker)),
  ask: (key: string, text: string, blocking: boolean) => post<Question>(itemPath(key) + "/questions", { text, blocking }),
  answer: (question: string, answer: string) => post<Question>(`/api/v1/questions/${enc(question)}/answer`, { answer }),
  transcript: (run: string) => get<Transcript>(`/api/v1/runs/${enc(run)}/transcript`),
  budget: (key: string) => get<Amount & { ticket: string }>(itemPath(key) + "/budget"),
  log: (run: string, offset: number) => get<LogChunk>(`/api/v1/runs/${enc(run)}/log?offset=${offset}`),
  subscription: (key: string) => get<Subscription>(itemPath(key) + "/subscription"),
  subscribe: (key: string, on: boolean) =>
    on ? request<Subscription>("PUT", itemPath(key) + "/subscription") : del<void>(itemPath(key) + "/subscription"),
};

// setKillSwitch pulls (on) or releases the platform's kill switch.
export const setKillSwitch = (on: boolean) => post<Platform>(`/api/v1/platform/${on ? "pause" : "resume"}`);
