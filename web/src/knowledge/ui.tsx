// Small pieces the Knowledge page's views share.
import type { Role } from "./api";

const enc = encodeURIComponent;
export const orgHref = (org: string) => `/orgs/${enc(org)}/knowledge`;
export const spaceHref = (org: string, space: string) => `${orgHref(org)}/${enc(space)}`;
export const entryHref = (org: string, space: string, slug: string, query = "") => `${spaceHref(org, space)}/${enc(slug)}${query}`;
export const canWrite = (r: Role) => r === "member" || r === "admin";

// Tags lists tags, each a link to its space's entries with that tag.
export function Tags({ tags, base }: { tags: string[] | null; base: string }) {
  if (!tags?.length) return null;
  return (
    <ul class="kn-tags" aria-label="Tags">
      {tags.map((t) => (
        <li key={t}>
          <a href={`${base}?tag=${enc(t)}`}>{t}</a>
        </li>
      ))}
    </ul>
  );
}
