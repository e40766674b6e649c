// The form that creates a project in an organization: key, name,
// repository (forge, URL, default branch, credentials reference), merge
// policy, budgets and concurrency. The API checks every field and names
// the one that is wrong.
import { useState } from "preact/hooks";
import type { Project } from "../api";
import { Field, FormError, useForm, value } from "./forms";

interface Draft {
  key: string;
  name: string;
  forge: string;
  url: string;
  default_branch: string;
  credentials_ref: string;
  mode: string;
  required_approvals: string;
  required_checks: string;
  per_ticket_usd: string;
  per_day_usd: string;
  concurrency_limit: string;
}

const empty: Draft = {
  key: "",
  name: "",
  forge: "",
  url: "",
  default_branch: "main",
  credentials_ref: "",
  mode: "manual",
  required_approvals: "0",
  required_checks: "",
  per_ticket_usd: "",
  per_day_usd: "",
  concurrency_limit: "0",
};

const fields = [
  "key",
  "name",
  "repository",
  "repository.forge",
  "repository.url",
  "repository.default_branch",
  "repository.credentials_ref",
  "merge_policy.mode",
  "merge_policy.required_approvals",
  "merge_policy.required_checks",
  "budgets.per_ticket_usd",
  "budgets.per_day_usd",
  "concurrency_limit",
];

// num sends a number the person typed, or the text itself when it is not
// one, so the API names the field and what is wrong with it.
function num(s: string): number | string {
  const n = Number(s);
  return s.trim() !== "" && Number.isFinite(n) ? n : s;
}

// body is the POST /orgs/{org}/projects body of a draft.
function body(d: Draft): Record<string, unknown> {
  const out: Record<string, unknown> = {
    key: d.key.trim(),
    name: d.name.trim(),
    merge_policy: {
      mode: d.mode,
      required_approvals: num(d.required_approvals),
      required_checks: d.required_checks
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    },
    concurrency_limit: num(d.concurrency_limit),
    budgets: {
      per_ticket_usd: d.per_ticket_usd.trim() ? num(d.per_ticket_usd) : null,
      per_day_usd: d.per_day_usd.trim() ? num(d.per_day_usd) : null,
    },
  };
  if (d.forge) {
    out.repository = {
      forge: d.forge,
      url: d.url.trim(),
      default_branch: d.default_branch.trim() || "main",
      credentials_ref: d.credentials_ref.trim(),
    };
  }
  return out;
}

export function NewProject({ create, onCreated }: { create: (body: Record<string, unknown>) => Promise<Project>; onCreated: (p: Project) => void }) {
  const form = useForm(fields);
  const [d, setD] = useState<Draft>(empty);
  const set = (k: keyof Draft) => (e: Event) => setD({ ...d, [k]: value(e) });
  const submit = async (e: Event) => {
    e.preventDefault();
    let made: Project | null = null;
    if (await form.submit(async () => void (made = await create(body(d))))) onCreated(made!);
  };
  return (
    <form onSubmit={submit} aria-label="New project">
      <FormError form={form} />
      <Field form={form} name="key" label="Key" hint="Upper-case letters and digits, like ACME: ticket keys become ACME-1, ACME-2…">
        {(a) => <input {...a} required value={d.key} onInput={(e) => setD({ ...d, key: value(e).toUpperCase() })} />}
      </Field>
      <Field form={form} name="name" label="Name">
        {(a) => <input {...a} required value={d.name} onInput={set("name")} />}
      </Field>
      <fieldset>
        <legend>Repository</legend>
        <Field form={form} name="repository.forge" label="Forge">
          {(a) => (
            <select {...a} value={d.forge} onChange={set("forge")}>
              <option value="">No repository yet</option>
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
            <Field form={form} name="repository.credentials_ref" label="Credentials reference" hint="Where Core reads the forge's token, e.g. env:GIT_TOKEN; never the token itself.">
              {(a) => <input {...a} value={d.credentials_ref} placeholder="env:GIT_TOKEN" onInput={set("credentials_ref")} />}
            </Field>
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
        <Field form={form} name="merge_policy.required_approvals" label="Required approvals">
          {(a) => <input {...a} type="number" min={0} value={d.required_approvals} onInput={set("required_approvals")} />}
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
      <Field form={form} name="concurrency_limit" label="Running flows at once (0: no limit)">
        {(a) => <input {...a} type="number" min={0} value={d.concurrency_limit} onInput={set("concurrency_limit")} />}
      </Field>
      <button type="submit" disabled={form.busy}>
        Create project
      </button>
    </form>
  );
}
