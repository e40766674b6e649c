// Project settings: name, then the repository, merge policy, budgets
// and concurrency fieldsets the new-project form shares
// (admin/projectfields.tsx), today's spend and the pause. Controls only for
// project.update; the API's problem with a field shows next to it.
import { useEffect, useState } from "preact/hooks";
import { Field, FormError, useForm, type FormState } from "../admin/forms";
import { budgetsBody, draftOf, mergePolicyBody, num, ProjectFieldsets, projectFields, repositoryBody, type ProjectDraft } from "../admin/projectfields";
import { enc, get, patch, permissions, type Project, type ProjectBudget } from "../api";
import { useAction, useLoad } from "../load";
import { Alert, Badge, permissionsOrNone, usd } from "../ui";

interface Form extends ProjectDraft {
  name: string;
}

const toForm = (p: Project): Form => ({ name: p.name, ...draftOf(p) });

// toPatch sends only the sections a person changed (a JSON merge patch).
function toPatch(p: Project, f: Form): Record<string, unknown> {
  const was = toForm(p);
  const changed = (...ks: (keyof Form)[]) => ks.some((k) => f[k] !== was[k]);
  const body: Record<string, unknown> = { version: p.version };
  if (changed("name")) body.name = f.name.trim();
  if (changed("forge", "url", "default_branch", "credentials_ref", "api_url")) body.repository = repositoryBody(f, true);
  if (changed("mode", "required_approvals", "required_checks")) body.merge_policy = mergePolicyBody(f);
  if (changed("per_ticket_usd", "per_day_usd")) body.budgets = budgetsBody(f);
  if (changed("concurrency_limit")) body.concurrency_limit = num(f.concurrency_limit);
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
const fields = ["name", ...projectFields];

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
      <ProjectFieldsets form={state} d={form} set={set} />
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
