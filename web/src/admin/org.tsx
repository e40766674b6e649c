// An organization's page: its name, its projects (and a form for a new
// one), its members and its webhooks. Organization admins (and platform
// admins) rename it and manage them; others read the projects and members.
import { useEffect, useState } from "preact/hooks";
import { ApiError, enc, type Organization } from "../api";
import { useLoad } from "../load";
import { navigate } from "../router";
import { Alert, Badge, Disclosure } from "../ui";
import { orgs, webhooks } from "./api";
import { Field, FormError, useForm, value } from "./forms";
import { Members } from "./members";
import { NewProject } from "./projectform";
import { Webhooks } from "./webhooks";

export default function Page({ org }: Record<string, string>) {
  const { data, error, setData } = useLoad(async () => {
    const [o, projects] = await Promise.all([orgs.get(org), orgs.projects(org)]);
    // Only the organization's admins may list its webhooks: their answer
    // says whether this person administers it (a 403 otherwise).
    const admin = await webhooks(`/api/v1/orgs/${enc(o.slug)}/webhooks`)
      .list()
      .then(
        () => true,
        (e) => {
          if (e instanceof ApiError && e.status === 403) return false;
          throw e;
        },
      );
    return { o, projects, admin };
  }, [org]);
  const o = data?.o;
  return (
    <section class="admin">
      <h1>{o ? o.name : org}</h1>
      <Alert error={error} />
      {o && (
        <>
          <p class="muted">
            Slug <code>{o.slug}</code> ·{" "}
            <a href={`/orgs/${enc(o.slug)}/knowledge`}>Knowledge</a>
          </p>
          {data.admin && <Rename o={o} onRenamed={(n) => setData({ ...data, o: n })} />}
          <section aria-labelledby="projects-h">
            <h2 id="projects-h">Projects</h2>
            {!data.projects.length && <p class="muted">No projects yet{data.admin ? ": create the first one below." : "."}</p>}
            <ul class="projects">
              {data.projects.map((p) => (
                <li key={p.id} class="card" data-testid="project" data-key={p.key} data-nav>
                  <a href={`/projects/${enc(p.key)}`} class="title">
                    {p.key} · {p.name}
                  </a>
                  {p.paused && <Badge kind="pause">paused</Badge>}
                  {!p.repository && <Badge kind="attention">no repository</Badge>}
                  <span class="links">
                    <a href={`/projects/${enc(p.key)}/settings`} aria-label={`Settings of ${p.key}`}>
                      Settings
                    </a>
                    <a href={`/projects/${enc(p.key)}/members`} aria-label={`Members of ${p.key}`}>
                      Members
                    </a>
                  </span>
                </li>
              ))}
            </ul>
            {data.admin && (
              <Disclosure summary="New project">
                <NewProject
                  create={(b) => orgs.createProject(o.slug, b)}
                  onCreated={(p) => navigate(`/projects/${enc(p.key)}/settings`)}
                />
              </Disclosure>
            )}
          </section>
          <Members base={`/api/v1/orgs/${enc(o.slug)}/members`} canManage={data.admin} scope={o.name} />
          {data.admin && <Webhooks base={`/api/v1/orgs/${enc(o.slug)}/webhooks`} scope={o.name} />}
        </>
      )}
    </section>
  );
}

// Rename is an organization admin's form for the organization's name (its
// slug never changes: it is the organization's address and Knowledge
// space). It sends the version it read: a rename by someone else since is
// refused (409) with the API's message, and the page keeps what was typed.
function Rename({ o, onRenamed }: { o: Organization; onRenamed: (o: Organization) => void }) {
  const form = useForm(["name"]);
  const [name, setName] = useState(o.name);
  const [saved, setSaved] = useState(false);
  useEffect(() => setName(o.name), [o.version]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    let renamed: Organization | null = null;
    if (await form.submit(async () => (renamed = await orgs.rename(o, name.trim())))) {
      onRenamed(renamed!);
      setSaved(true);
    }
  };
  return (
    <section aria-labelledby="org-name-h">
      <h2 id="org-name-h">Name</h2>
      <form onSubmit={submit} aria-label="Rename organization">
        <FormError form={form} />
        <Field form={form} name="name" label="Organization name" hint="Shown across Ballet; the slug and addresses stay as they are.">
          {(a) => (
            <input
              {...a}
              required
              value={name}
              onInput={(e) => {
                setSaved(false);
                setName(value(e));
              }}
            />
          )}
        </Field>
        <button type="submit" disabled={form.busy}>
          Save name
        </button>
        {saved && (
          <p role="status" data-testid="org-renamed">
            Renamed to {o.name}.
          </p>
        )}
      </form>
    </section>
  );
}
