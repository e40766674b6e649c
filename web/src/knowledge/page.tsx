// The Knowledge page: an organization's spaces, search, entries (rendered,
// edited with a preview, deleted and undeleted) and their history with diffs
// and restore. Routes: /orgs/:org/knowledge[/:space[/:slug]], with ?new on a
// space, ?edit, ?history or ?version=N on an entry.
import "./knowledge.css";
import { useLoad } from "../load";
import { useLocation } from "../router";
import { useSession } from "../session";
import { role, type Role } from "./api";
import { Browse } from "./browse";
import { EntryPage, NewEntry } from "./entry";
import { entryHref, orgHref, spaceHref } from "./ui";

export default function Page({ org, space, slug }: Record<string, string>) {
  const q = useLocation().searchParams;
  const session = useSession();
  // The role only decides which controls show; unknown, it shows none.
  const r = useLoad<Role>(() => (session ? role(org, session).catch(() => "viewer" as Role) : Promise.resolve("viewer")), [org, session]);
  const who = r.data ?? "viewer";
  let body;
  if (slug) {
    const n = Number(q.get("version"));
    const version = Number.isInteger(n) && n > 0 ? n : undefined;
    const mode = q.has("edit") ? "edit" : q.has("history") ? "history" : "view";
    body = <EntryPage key={version} org={org} space={space} slug={slug} mode={mode} version={version} role={who} />;
  } else if (space && q.has("new")) {
    body = <NewEntry org={org} space={space} />;
  } else {
    body = <Browse org={org} space={space} role={who} q={q.get("q") ?? ""} tag={q.get("tag") ?? ""} filter={q.get("space") ?? ""} />;
  }
  return (
    <div class="kn">
      <nav aria-label="Breadcrumb" class="kn-crumbs">
        <a href={orgHref(org)} aria-current={!space ? "page" : undefined}>
          Knowledge of {org}
        </a>
        {space && (
          <>
            {" / "}
            <a href={spaceHref(org, space)} aria-current={!slug ? "page" : undefined}>
              {space}
            </a>
          </>
        )}
        {slug && (
          <>
            {" / "}
            <a href={entryHref(org, space, slug)} aria-current="page">
              {slug}
            </a>
          </>
        )}
      </nav>
      {body}
    </div>
  );
}
