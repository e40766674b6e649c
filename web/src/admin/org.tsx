// An organization's page: its projects (and a form for a new one), its
// members and its webhooks. Organization admins (and platform admins)
// manage them; others read the projects and members.
import { ApiError, enc } from "../api";
import { useLoad } from "../load";
import { navigate } from "../router";
import { Alert, Badge, Disclosure } from "../ui";
import { orgs, webhooks } from "./api";
import { Members } from "./members";
import { NewProject } from "./projectform";
import { Webhooks } from "./webhooks";

export default function Page({ org }: Record<string, string>) {
  const { data, error } = useLoad(async () => {
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
          <section aria-labelledby="projects-h">
            <h2 id="projects-h">Projects</h2>
            {!data.projects.length && <p class="muted">No projects yet{data.admin ? ": create the first one below." : "."}</p>}
            <ul class="projects">
              {data.projects.map((p) => (
                <li key={p.id} class="card" data-testid="project" data-key={p.key}>
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
