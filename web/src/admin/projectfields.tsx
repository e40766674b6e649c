// A project's repository, merge policy, budgets and concurrency: the
// fieldsets the new-project form (projectform.tsx) and the project
// settings (pages/settings.tsx) share, with the drafts they edit and the
// request bodies' parts they make. The API checks every value and names
// the field that is wrong; the controls carry the API's own bounds.
import type { Project } from "../api";
import { Field, type FormState } from "./forms";

// The API's bounds (internal/bounds: RequiredApprovals,
// ProjectConcurrency), the same on create and on update.
export const maxApprovals = 10;
export const maxConcurrency = 1000;

// ProjectDraft is what the fieldsets edit, as typed.
export interface ProjectDraft {
  forge: string;
  url: string;
  default_branch: string;
  credentials_ref: string;
  api_url: string;
  mode: string;
  required_approvals: string;
  required_checks: string;
  per_ticket_usd: string;
  per_day_usd: string;
  concurrency_limit: string;
}

// draftOf is a project's settings as a draft (a new project's defaults
// without one).
export function draftOf(p?: Project): ProjectDraft {
  return {
    forge: p?.repository?.forge ?? "",
    url: p?.repository?.url ?? "",
    default_branch: p?.repository?.default_branch ?? "main",
    credentials_ref: p?.repository?.credentials_ref ?? "",
    api_url: p?.repository?.api_url ?? "",
    mode: p?.merge_policy.mode ?? "manual",
    required_approvals: String(p?.merge_policy.required_approvals ?? 0),
    required_checks: (p?.merge_policy.required_checks ?? []).join(", "),
    per_ticket_usd: p?.budgets.per_ticket_usd == null ? "" : String(p.budgets.per_ticket_usd),
    per_day_usd: p?.budgets.per_day_usd == null ? "" : String(p.budgets.per_day_usd),
    concurrency_limit: String(p?.concurrency_limit ?? 0),
  };
}

// projectFields are the API's names of the fields the fieldsets show.
export const projectFields = [
  "repository",
  "repository.forge",
  "repository.url",
  "repository.default_branch",
  "repository.credentials_ref",
  "repository.api_url",
  "merge_policy.mode",
  "merge_policy.required_approvals",
  "merge_policy.required_checks",
  "budgets.per_ticket_usd",
  "budgets.per_day_usd",
  "concurrency_limit",
];

// num sends a number the person typed, or the text itself when it is not
// one, so the API names the field and what is wrong with it.
export function num(s: string): number | string {
  const n = Number(s);
  return s.trim() !== "" && Number.isFinite(n) ? n : s;
}

// amount is a budget: empty lifts the limit (null).
const amount = (s: string) => (s.trim() ? num(s) : null);

// repositoryBody is the request's repository (null: none). In a merge
// patch (update) an empty optional field is null, its default; on create
// it is "" and the default branch main.
export function repositoryBody(d: ProjectDraft, patch: boolean): Record<string, unknown> | null {
  if (!d.forge) return null;
  const empty = patch ? null : "";
  return {
    forge: d.forge,
    url: d.url.trim(),
    default_branch: d.default_branch.trim() || (patch ? null : "main"),
    credentials_ref: d.credentials_ref.trim() || empty,
    // Plain git has no API: it has no API address.
    api_url: d.forge === "git" ? empty : d.api_url.trim() || empty,
  };
}

export const mergePolicyBody = (d: ProjectDraft) => ({
  mode: d.mode,
  required_approvals: num(d.required_approvals),
  required_checks: d.required_checks
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
});

export const budgetsBody = (d: ProjectDraft) => ({ per_ticket_usd: amount(d.per_ticket_usd), per_day_usd: amount(d.per_day_usd) });

// ProjectFieldsets are the repository, merge policy, budgets and
// concurrency of a project's form.
export function ProjectFieldsets({ form, d, set }: { form: FormState; d: ProjectDraft; set: (k: keyof ProjectDraft) => (e: Event) => void }) {
  return (
    <>
      <fieldset>
        <legend>Repository</legend>
        <Field form={form} name="repository.forge" label="Forge">
          {(a) => (
            <select {...a} value={d.forge} onChange={set("forge")}>
              <option value="">No repository</option>
              <option value="git">git: a plain git remote</option>
              <option value="gitea">gitea</option>
              <option value="github">github</option>
            </select>
          )}
        </Field>
        {d.forge && (
          <>
            <Field form={form} name="repository.url" label="URL" hint="The address agents clone.">
              {(a) => <input {...a} required value={d.url} onInput={set("url")} />}
            </Field>
            <Field form={form} name="repository.default_branch" label="Default branch">
              {(a) => <input {...a} value={d.default_branch} onInput={set("default_branch")} />}
            </Field>
            <Field
              form={form}
              name="repository.credentials_ref"
              label="Credentials reference"
              hint="Where Core reads the forge's token, e.g. env:GIT_TOKEN; never the token itself. Empty: none."
            >
              {(a) => <input {...a} value={d.credentials_ref} placeholder="env:GIT_TOKEN" onInput={set("credentials_ref")} />}
            </Field>
            {d.forge !== "git" && (
              <Field
                form={form}
                name="repository.api_url"
                label="Forge API address"
                hint="Only for a forge whose API is not where the URL says (GitHub Enterprise, a Gitea behind a proxy). Empty: derived from the URL."
              >
                {(a) => <input {...a} value={d.api_url} placeholder="https://git.example.com/api/v1" onInput={set("api_url")} />}
              </Field>
            )}
          </>
        )}
      </fieldset>
      <fieldset>
        <legend>Merge policy</legend>
        <Field form={form} name="merge_policy.mode" label="Mode">
          {(a) => (
            <select {...a} value={d.mode} onChange={set("mode")}>
              <option value="manual">manual: a person merges</option>
              <option value="auto">auto: Ballet merges</option>
            </select>
          )}
        </Field>
        <Field form={form} name="merge_policy.required_approvals" label="Required approvals" hint={`From 0 to ${maxApprovals}.`}>
          {(a) => <input {...a} type="number" min={0} max={maxApprovals} value={d.required_approvals} onInput={set("required_approvals")} />}
        </Field>
        <Field form={form} name="merge_policy.required_checks" label="Required checks" hint="Comma-separated check names.">
          {(a) => <input {...a} value={d.required_checks} onInput={set("required_checks")} />}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Budgets (US dollars; empty: no limit)</legend>
        <Field form={form} name="budgets.per_ticket_usd" label="Per ticket">
          {(a) => <input {...a} inputMode="decimal" value={d.per_ticket_usd} onInput={set("per_ticket_usd")} />}
        </Field>
        <Field form={form} name="budgets.per_day_usd" label="Per day">
          {(a) => <input {...a} inputMode="decimal" value={d.per_day_usd} onInput={set("per_day_usd")} />}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Concurrency</legend>
        <Field form={form} name="concurrency_limit" label="Running flows at once (0: no limit)">
          {(a) => <input {...a} type="number" min={0} max={maxConcurrency} value={d.concurrency_limit} onInput={set("concurrency_limit")} />}
        </Field>
      </fieldset>
    </>
  );
}
