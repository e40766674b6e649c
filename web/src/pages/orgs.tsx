// Organizations and their projects, each project with its pages.
import { enc, get, type Organization, type Project } from "../api";
import { useLoad } from "../load";
import { useSession } from "../session";
import { Alert, Badge } from "../ui";

interface OrgProjects {
  org: Organization;
  projects: Project[];
  error: string;
}

export default function Page() {
  const session = useSession();
  const { data, error } = useLoad(async () => {
    const { organizations } = await get<{ organizations: Organization[] }>("/api/v1/orgs");
    return Promise.all(
      organizations.map(async (org): Promise<OrgProjects> => {
        try {
          const { projects } = await get<{ projects: Project[] }>(`/api/v1/orgs/${enc(org.slug)}/projects`);
          return { org, projects, error: "" };
        } catch (e) {
          return { org, projects: [], error: (e as Error).message };
        }
      }),
    );
  }, []);

  return (
    <section>
      <h1>Organizations and projects</h1>
      <Alert error={error} />
      {session?.platform_admin && (
        <p>
          <a href="/orgs/new" class="button">
            New organization
          </a>
        </p>
      )}
      {data && !data.length && (
        <p>
          You belong to no organization yet.{" "}
          {session?.platform_admin ? "Create the first one with New organization." : "Ask an organization's admin to add you as a member."}
        </p>
      )}
      {data?.map(({ org, projects, error }) => (
        <section key={org.id} class="org" aria-labelledby={`org-${org.slug}`}>
          <h2 id={`org-${org.slug}`}>
            {org.name} <span class="muted">({org.slug})</span>
          </h2>
          <p class="links" data-nav data-org={org.slug}>
            <a href={`/orgs/${enc(org.slug)}/settings`}>Projects, members and webhooks of {org.name}</a>
            {" · "}
            <a href={`/orgs/${enc(org.slug)}/knowledge`}>Knowledge of {org.name}</a>
          </p>
          <Alert error={error} />
          {!error && !projects.length && (
            <p class="empty" data-testid="no-projects">
              No projects you can see in {org.name} yet. Its admins create them in <a href={`/orgs/${enc(org.slug)}/settings`}>the organization's settings</a>;
              anyone else asks an admin for a role in one.
            </p>
          )}
          <ul class="projects">
            {projects.map((p) => (
              <li key={p.id} class="card" data-testid="project" data-key={p.key} data-nav>
                <a href={`/projects/${enc(p.key)}`} class="title">
                  {p.key} · {p.name}
                </a>
                {p.paused && <Badge kind="pause">paused</Badge>}
                <span class="links">
                  <a href={`/projects/${enc(p.key)}`} aria-label={`Board of ${p.key}`}>
                    Board
                  </a>
                  <a href={`/projects/${enc(p.key)}/pipelines`} aria-label={`Pipelines of ${p.key}`}>
                    Pipelines
                  </a>
                  <a href={`/projects/${enc(p.key)}/settings`} aria-label={`Settings of ${p.key}`}>
                    Settings
                  </a>
                </span>
              </li>
            ))}
          </ul>
        </section>
      ))}
    </section>
  );
}
