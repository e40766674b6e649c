// A project's members: the role overrides that replace a person's
// organization role in this project (or give one only here).
import { enc, get, permissions, type Project } from "../api";
import { useLoad } from "../load";
import { Alert, permissionsOrNone } from "../ui";
import { Members } from "./members";

export default function Page({ project }: Record<string, string>) {
  const { data, error } = useLoad(async () => {
    const [p, perms] = await Promise.all([get<Project>(`/api/v1/projects/${enc(project)}`), permissionsOrNone(() => permissions(project))]);
    return { p, perms };
  }, [project]);
  const p = data?.p;
  return (
    <section class="admin">
      <h1>{p ? `${p.key} members` : `${project} members`}</h1>
      <Alert error={error} />
      {p && (
        <>
          <p class="muted">
            A role here replaces the person's organization role in {p.key} only; people without one keep their organization role.
          </p>
          <Members base={`/api/v1/projects/${enc(p.key)}/members`} canManage={data.perms.has("member.manage")} scope={p.key} />
        </>
      )}
    </section>
  );
}
