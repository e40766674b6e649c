// A project's webhooks (its admins).
import { enc, permissions } from "../api";
import { useLoad } from "../load";
import { Alert } from "../ui";
import { Webhooks } from "./webhooks";

export default function Page({ project }: Record<string, string>) {
  const { data, error } = useLoad(() => permissions(project), [project]);
  return (
    <section class="admin">
      <h1>{project} webhooks</h1>
      <Alert error={error} />
      {data &&
        (data.has("project.update") ? (
          <Webhooks base={`/api/v1/projects/${enc(project)}/webhooks`} scope={project} />
        ) : (
          <p class="muted">Only the project's admins see and change its webhooks.</p>
        ))}
    </section>
  );
}
