// The form that creates a project in an organization: key, name, and the
// repository, merge policy, budgets and concurrency fieldsets the project
// settings share (projectfields.tsx). The API checks every field and
// names the one that is wrong.
import { useState } from "preact/hooks";
import type { Project } from "../api";
import { Field, FormError, useForm, value } from "./forms";
import { budgetsBody, draftOf, mergePolicyBody, num, ProjectFieldsets, projectFields, repositoryBody, type ProjectDraft } from "./projectfields";

interface Draft extends ProjectDraft {
  key: string;
  name: string;
}

const fields = ["key", "name", ...projectFields];

// body is the POST /orgs/{org}/projects body of a draft.
function body(d: Draft): Record<string, unknown> {
  const out: Record<string, unknown> = {
    key: d.key.trim(),
    name: d.name.trim(),
    merge_policy: mergePolicyBody(d),
    concurrency_limit: num(d.concurrency_limit),
    budgets: budgetsBody(d),
  };
  const repository = repositoryBody(d, false);
  if (repository) out.repository = repository;
  return out;
}

export function NewProject({ create, onCreated }: { create: (body: Record<string, unknown>) => Promise<Project>; onCreated: (p: Project) => void }) {
  const form = useForm(fields);
  const [d, setD] = useState<Draft>(() => ({ key: "", name: "", ...draftOf() }));
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
      <ProjectFieldsets form={form} d={d} set={set} />
      <button type="submit" disabled={form.busy}>
        Create project
      </button>
    </form>
  );
}
