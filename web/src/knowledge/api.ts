// The Knowledge service's REST API as Core proxies it (/api/v1/knowledge/...,
// docs/knowledge.md), through the shell's request helpers.
import { enc, get, post, request, type Session } from "../api";

export interface Space {
  slug: string;
  title: string;
  description: string;
}

export interface Entry {
  space: string;
  slug: string;
  title: string;
  body: string;
  tags: string[] | null;
  version: number;
  created_at: string;
  updated_at: string;
  updated_by: string;
  deleted: boolean;
  note?: string;
}

export interface Version {
  version: number;
  title: string;
  body: string;
  tags: string[] | null;
  author: string;
  at: string;
  note: string;
}

export interface SearchResult {
  space: string;
  slug: string;
  title: string;
  version: number;
  tags: string[] | null;
  snippet: string; // HTML-escaped text with <mark>…</mark> around the hits
  rank: number;
}

export interface Diff {
  from: number;
  to: number;
  diff: string; // a unified diff
}

// What a person writes of an entry.
export interface Content {
  title: string;
  body: string;
  tags: string[];
  note?: string;
}

// A page of a space's entries (the service's default limit).
export const pageSize = 100;

const base = (org: string) => `/api/v1/knowledge/orgs/${enc(org)}`;
const entries = (org: string, space: string) => `${base(org)}/spaces/${enc(space)}/entries`;
// A slug's slashes travel as %2F.
const entry = (org: string, space: string, slug: string) => `${entries(org, space)}/${enc(slug)}`;
const query = (q: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
};

export const spaces = async (org: string) => (await get<{ spaces: Space[] }>(`${base(org)}/spaces`)).spaces;
export const createSpace = (org: string, s: { slug: string; title?: string }) => post<Space>(`${base(org)}/spaces`, s);
// listEntries is a page of a space's entries by slug, after the slug given.
export const listEntries = async (org: string, space: string, tag: string, after = "") =>
  (await get<{ entries: Entry[] }>(entries(org, space) + query({ tag, after }))).entries;
export const readEntry = (org: string, space: string, slug: string, version?: number) =>
  get<Entry>(entry(org, space, slug) + query({ version }));
export const createEntry = (org: string, space: string, e: Content & { slug: string }) => post<Entry>(entries(org, space), e);
// saveEntry saves a new version based on the version read: 409 when stale.
export const saveEntry = (org: string, space: string, slug: string, version: number, c: Content) =>
  request<Entry>("PUT", entry(org, space, slug), { version, ...c });
export const deleteEntry = (org: string, space: string, slug: string) => request<Entry>("DELETE", entry(org, space, slug));
export const undeleteEntry = (org: string, space: string, slug: string) => post<Entry>(`${entry(org, space, slug)}/undelete`);
export const versions = async (org: string, space: string, slug: string) =>
  (await get<{ versions: Version[] }>(`${entry(org, space, slug)}/versions`)).versions;
export const diff = (org: string, space: string, slug: string, from: number, to: number) =>
  get<Diff>(`${entry(org, space, slug)}/diff` + query({ from, to }));
export const restore = (org: string, space: string, slug: string, version: number, basedOn: number) =>
  post<Entry>(`${entry(org, space, slug)}/restore`, { version, based_on: basedOn });
export const search = async (org: string, q: string, space: string, tag: string) =>
  (await get<{ results: SearchResult[] }>(`${base(org)}/search` + query({ q, space, tag }))).results;

export type Role = "viewer" | "member" | "admin";

// role is the signed-in person's role in org, as Knowledge sees it (viewers
// read, members write, admins manage spaces): platform admins manage every
// organization, everyone else holds their membership's role. It only decides
// which controls the page shows: the service checks every request anyway.
export async function role(org: string, s: Session): Promise<Role> {
  if (s.platform_admin) return "admin";
  const { members } = await get<{ members: { subject: string; role: string }[] }>(`/api/v1/orgs/${enc(org)}/members`);
  const r = members.find((m) => m.subject === s.subject)?.role;
  return r === "admin" || r === "member" ? r : "viewer";
}
