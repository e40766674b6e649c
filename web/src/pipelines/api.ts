// The pipeline routes the editor calls (docs/pipelines.md), on the shell's
// request helpers.
import { ApiError, enc, get, permissions as readPermissions, type Project, post, request } from "../api";
import type { Definition, PipelineVersion, Problem } from "./model";

const pipeline = (key: string, name: string) => `/api/v1/projects/${enc(key)}/pipelines/${enc(name)}`;

export const getProject = (key: string) => get<Project>(`/api/v1/projects/${enc(key)}`);

export const listPipelines = (key: string) => get<{ pipelines: PipelineVersion[] }>(`/api/v1/projects/${enc(key)}/pipelines`);

export const listVersions = (key: string, name: string) => get<{ versions: PipelineVersion[] }>(`${pipeline(key, name)}/versions`);

export const getLatest = (key: string, name: string) => get<PipelineVersion>(pipeline(key, name));

// publish saves yaml as the version after base, the version the edit is
// based on.
export const publish = (key: string, name: string, base: number, yaml: string) =>
  request<PipelineVersion>("PUT", pipeline(key, name), { version: base, yaml });

export const parse = (yaml: string) => post<{ definition?: Definition; errors: Problem[] }>("/api/v1/pipelines/parse", { yaml });

export const render = (definition: Definition) => post<{ yaml: string }>("/api/v1/pipelines/render", { definition });

// permissions answers null while Core has no such route (a 404 naming no
// route): the editor then learns it may not publish from a 403.
export async function permissions(key: string): Promise<Set<string> | null> {
  try {
    return await readPermissions(key);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && e.message.startsWith("no route")) return null;
    throw e;
  }
}
