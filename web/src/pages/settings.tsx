// Project settings: name, repository (forge, URL, branch, the forge's API
// address and credentials reference), merge policy, budgets (with today's
// spend), concurrency limit and the pause. Controls only for
// project.update; the API's problem with a field shows next to it.
import { useEffect, useState } from "preact/hooks";
import { Field, FormError, useForm, type FormState } from "../admin/forms";
import { enc, get, patch, permissions, type Project, type ProjectBudget } from "../api";
import { useAction, useLoad } from "../load";
import { Alert, Badge, permissionsOrNone, usd } from "../ui";

interface Form {
  name: string;
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

function toForm(p: Project): Form {
  return {
    name: p.name,
    forge: p.repository?.forge ?? "",
    url: p.repository?.url ?? "",
    default_branch: p.repository?.default_branch ?? "main",
    credentials_ref: p.repository?.credentials_ref ?? "",
    api_url: p.repository?.api_url ?? "",
    mode: p.merge_policy.mode,
    required_approvals: String(p.merge_policy.required_approvals),
    required_checks: (p.merge_policy.required_checks ?? []).join(", "),
    per_ticket_usd: p.budgets.per_ticket_usd === null ? "" : String(p.budgets.per_ticket_usd),
    per_day_usd: p.budgets.per_day_usd === null ? "" : String(p.budgets.per_day_usd),
    concurrency_limit: String(p.concurrency_limit),
  };
}

// amount is a budget field: empty lifts the limit (null). The API checks the value.
function amount(s: string): number | null | string {
  if (!s.trim()) return null;
  const n = Number(s);
  return Number.isFinite(n) ? n : s;
}

// toPatch sends only the sections a person changed (a JSON merge patch).
function toPatch(p: Project, f: Form): Record<string, unknown> {
  const was = toForm(p);
  const changed = (...ks: (keyof Form)[]) => ks.some((k) => f[k] !== was[k]);
  const body: Record<string, unknown> = { version: p.version };
  if (changed("name")) body.name = f.name.trim();
  if (changed("forge", "url", "default_branch", "credentials_ref", "api_url")) {
    body.repository = f.forge
      ? {
          forge: f.forge,
          url: f.url.trim(),
          default_branch: f.default_branch.trim() || null,
          credentials_ref: f.credentials_ref.trim() || null,
          // Plain git has no API: its address is cleared.
          api_url: f.forge === "git" ? null : f.api_url.trim() || null,
        }
      : null;
  }
  if (changed("mode", "required_approvals", "required_checks")) {
    body.merge_policy = {
      mode: f.mode,
      required_approvals: Number(f.required_approvals),
      required_checks: f.required_checks
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    };
  }
  if (changed("per_ticket_usd", "per_day_usd")) body.budgets = { per_ticket_usd: amount(f.per_ticket_usd), per_day_usd: amount(f.per_day_usd) };
  if (changed("concurrency_limit")) body.concurrency_limit = Number(f.concurrency_limit);
  return body;
}

export default function Page({ project }: Record<string, string>) {
  const { data, error, reload, setData } = useLoad(async () => {
    const [proj, budget, perms] = await Promise.all([
      get<Project>(`/api/v1/projects/${enc(project)}`),
      get<ProjectBudget>(`/api/v1/projects/${enc(project)}/budget`),
      permissionsOrNone(() => permissions(project)),
    ]);
    return { proj, budget, perms };
  }, [project]);
  const [form, setForm] = useState<Form | null>(null);
  const [saved, setSaved] = useState(false);
  const [run, busy, actionError] = useAction();
  const edit = useForm(fields);
  useEffect(() => {
    if (data) setForm(toForm(data.proj));
  }, [data?.proj.version]);

  const p = data?.proj;
  const can = data?.perms.has("project.update") ?? false;
  const set = (k: keyof Form) => (e: Event) => {
    setSaved(false);
    setForm({ ...form!, [k]: (e.target as HTMLInputElement).value });
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (!p || !form) return;
    const body = toPatch(p, form);
    if (Object.keys(body).length === 1) {
      setSaved(true); // nothing changed: nothing to send
      return;
    }
    const ok = await edit.submit(async () => {
      const np = await patch<Project>(`/api/v1/projects/${enc(project)}`, body);
      setData({ ...data!, proj: np });
      await reload(); // today's spend against the new limits
    });
    setSaved(ok);
  };
  const pause = (paused: boolean) =>
    run(async () => {
      const np = await patch<Project>(`/api/v1/projects/${enc(project)}`, { version: p!.version, paused });
      setData({ ...data!, proj: np });
    });

  const today = data?.budget.today;
  return (
    <section class="settings">
      <h1>{p ? `${p.key} · ${p.name} settings` : `${project} settings`}</h1>
      <Alert error={error} />
      {p && (
        <section aria-labelledby="pause-h">
          <h2 id="pause-h">Work</h2>
          <p data-testid="paused">
            {p.paused ? <Badge kind="pause">Paused</Badge> : "Running"}: {p.paused ? "no new stage starts in this project." : "tickets start when ready."}
          </p>
          {can &&
            (p.paused ? (
              <button type="button" disabled={busy} onClick={() => pause(false)}>
                Resume project
              </button>
            ) : (
              <button type="button" class="danger" disabled={busy} onClick={() => pause(true)}>
                Pause project
              </button>
            ))}
        </section>
      )}
      {today && (
        <section aria-labelledby="spend-h">
          <h2 id="spend-h">Spend today</h2>
          <p data-testid="spend">
            {usd(today.spent_usd)} of {usd(today.limit_usd)} on {data!.budget.day} ({data!.budget.timezone}) · {today.runs} runs ·{" "}
            {today.input_tokens} / {today.output_tokens} tokens
            {today.remaining_usd !== null && <> · {usd(today.remaining_usd)} left</>}
          </p>
        </section>
      )}
      {p && form && (can ? <Edit state={edit} form={form} set={set} save={save} saved={saved} /> : <ReadOnly p={p} />)}
      <Alert error={actionError} />
    </section>
  );
}

// fields are the API's field names the settings form shows (a problem with
// another is shown above the form).
const fields = [
  "name",
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

function Edit({
  state,
  form,
  set,
  save,
  saved,
}: {
  state: FormState;
  form: Form;
  set: (k: keyof Form) => (e: Event) => void;
  save: (e: Event) => void;
  saved: boolean;
}) {
  return (
    <form onSubmit={save} aria-label="Project settings">
      <FormError form={state} />
      <Field form={state} name="name" label="Project name" hint="The key stays: ticket keys and addresses name it.">
        {(a) => <input {...a} required value={form.name} onInput={set("name")} />}
      </Field>
      <fieldset>
        <legend>Repository</legend>
        <Field form={state} name="repository.forge" label="Forge">
          {(a) => (
            <select {...a} value={form.forge} onChange={set("forge")}>
              <option value="">No repository</option>
              <option value="git">git</option>
              <option value="gitea">gitea</option>
              <option value="github">github</option>
            </select>
          )}
        </Field>
        {form.forge && (
          <>
            <Field form={state} name="repository.url" label="URL" hint="The address agents clone.">
              {(a) => <input {...a} required value={form.url} onInput={set("url")} />}
            </Field>
            <Field form={state} name="repository.default_branch" label="Default branch">
              {(a) => <input {...a} value={form.default_branch} onInput={set("default_branch")} />}
            </Field>
            <Field
              form={state}
              name="repository.credentials_ref"
              label="Credentials reference"
              hint="Where Core reads the forge's token, e.g. env:GIT_TOKEN; never the token itself. Empty: none."
            >
              {(a) => <input {...a} value={form.credentials_ref} placeholder="env:GIT_TOKEN" onInput={set("credentials_ref")} />}
            </Field>
            {form.forge !== "git" && (
              <Field
                form={state}
                name="repository.api_url"
                label="Forge API address"
                hint="Only for a forge whose API is not where the URL says (GitHub Enterprise, a Gitea behind a proxy). Empty: derived from the URL."
              >
                {(a) => <input {...a} value={form.api_url} placeholder="https://git.example.com/api/v1" onInput={set("api_url")} />}
              </Field>
            )}
          </>
        )}
      </fieldset>
      <fieldset>
        <legend>Merge policy</legend>
        <Field form={state} name="merge_policy.mode" label="Mode">
          {(a) => (
            <select {...a} value={form.mode} onChange={set("mode")}>
              <option value="manual">manual: a person merges</option>
              <option value="auto">auto: Ballet merges</option>
            </select>
          )}
        </Field>
        <Field form={state} name="merge_policy.required_approvals" label="Required approvals">
          {(a) => <input {...a} type="number" min={0} max={10} value={form.required_approvals} onInput={set("required_approvals")} />}
        </Field>
        <Field form={state} name="merge_policy.required_checks" label="Required checks" hint="Comma-separated check names.">
          {(a) => <input {...a} value={form.required_checks} onInput={set("required_checks")} />}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Budgets (US dollars; empty: no limit)</legend>
        <Field form={state} name="budgets.per_ticket_usd" label="Per ticket">
          {(a) => <input {...a} inputMode="decimal" value={form.per_ticket_usd} onInput={set("per_ticket_usd")} />}
        </Field>
        <Field form={state} name="budgets.per_day_usd" label="Per day">
          {(a) => <input {...a} inputMode="decimal" value={form.per_day_usd} onInput={set("per_day_usd")} />}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Concurrency</legend>
        <Field form={state} name="concurrency_limit" label="Running flows at once (0: no limit)">
          {(a) => <input {...a} type="number" min={0} max={1000} value={form.concurrency_limit} onInput={set("concurrency_limit")} />}
        </Field>
      </fieldset>
      <button type="submit" disabled={state.busy}>
        Save settings
      </button>
      {saved && <p role="status">Saved.</p>}
    </form>
  );
}

function ReadOnly({ p }: { p: Project }) {
  return (
    <dl class="facts" data-testid="settings-readonly">
      <dt>Name</dt>
      <dd>{p.name}</dd>
      <dt>Repository</dt>
      <dd>
        {p.repository ? `${p.repository.forge} ${p.repository.url} (${p.repository.default_branch})` : "none"}
        {p.repository?.api_url && <> · API {p.repository.api_url}</>}
      </dd>
      <dt>Merge policy</dt>
      <dd>
        {p.merge_policy.mode}, {p.merge_policy.required_approvals} approvals
        {p.merge_policy.required_checks?.length ? `, checks ${p.merge_policy.required_checks.join(", ")}` : ""}
      </dd>
      <dt>Budgets</dt>
      <dd>
        per ticket {usd(p.budgets.per_ticket_usd)}, per day {usd(p.budgets.per_day_usd)}
      </dd>
      <dt>Concurrency limit</dt>
      <dd>{p.concurrency_limit || "no limit"}</dd>
    </dl>
  );
}
