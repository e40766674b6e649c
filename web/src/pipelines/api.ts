// The calls of the pipelines editor: JSON in and out, same-origin (the
// session cookie), errors in the API's one shape.
import type { Definition, PipelineVersion, Problem } from "./model";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown[] = [],
  ) {
    super(message);
  }
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: body === undefined ? { Accept: "application/json" } : { Accept: "application/json", "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = data?.error;
    throw new ApiError(res.status, e?.code ?? "", e?.message ?? `${method} ${path}: HTTP ${res.status}`, e?.details ?? []);
  }
  return data as T;
}

const project = (key: string) => `/api/v1/projects/${encodeURIComponent(key)}`;
const pipeline = (key: string, name: string) => `${project(key)}/pipelines/${encodeURIComponent(name)}`;

export const getProject = (key: string) => call<{ key: string; name: string; ticket_types: string[] }>("GET", project(key));

export const listPipelines = (key: string) => call<{ pipelines: PipelineVersion[] }>("GET", `${project(key)}/pipelines`);

export const listVersions = (key: string, name: string) => call<{ versions: PipelineVersion[] }>("GET", `${pipeline(key, name)}/versions`);

export const getLatest = (key: string, name: string) => call<PipelineVersion>("GET", pipeline(key, name));

export const publish = (key: string, name: string, version: number, yaml: string) =>
  call<PipelineVersion>("PUT", pipeline(key, name), { version, yaml });

// permissions answers null while the route does not exist (404).
export async function permissions(key: string): Promise<string[] | null> {
  try {
    return (await call<{ permissions: string[] }>("GET", `${project(key)}/permissions`)).permissions;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && e.message.includes("route")) return null;
    throw e;
  }
}

export const parse = (yaml: string) => call<{ definition?: Definition; errors: Problem[] }>("POST", "/api/v1/pipelines/parse", { yaml });

export const render = (definition: Definition) => call<{ yaml: string }>("POST", "/api/v1/pipelines/render", { definition });
