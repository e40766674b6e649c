// An organization's spaces, the search across them, and a space's entries.
import { useState } from "preact/hooks";
import { useAction, useLoad } from "../load";
import { navigate } from "../router";
import { Alert } from "../ui";
import { createSpace, listEntries, pageSize, search, spaces as listSpaces, type Entry, type Role } from "./api";
import { Snippet } from "./render";
import { canWrite, entryHref, orgHref, spaceHref, Tags } from "./ui";

interface Props {
  org: string;
  space?: string; // the space shown, if any
  role: Role;
  q: string; // the search, from the URL
  tag: string; // the tag filter, from the URL
  filter: string; // the search's space filter, from the URL
}

export function Browse({ org, space, role, q, tag, filter }: Props) {
  const spaces = useLoad(() => listSpaces(org), [org]);
  const current = space ? spaces.data?.find((s) => s.slug === space) : undefined;
  const within = filter || space || "";
  return (
    <div class="kn-browse">
      <aside class="kn-spaces">
        <h2 id="kn-spaces">Spaces</h2>
        <Alert error={spaces.error} />
        <nav aria-labelledby="kn-spaces">
          <ul>
            {spaces.data?.map((s) => (
              <li key={s.slug}>
                <a href={spaceHref(org, s.slug)} aria-current={s.slug === space ? "page" : undefined}>
                  {s.title || s.slug}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {role === "admin" && <NewSpace org={org} onCreated={() => void spaces.reload()} />}
      </aside>
      <div class="kn-main">
        <h1>{space ? `Space ${current?.title || space}` : `Knowledge of ${org}`}</h1>
        {current?.description && <p class="muted">{current.description}</p>}
        <SearchForm
          key={`${q}\n${tag}\n${within}`}
          spaces={spaces.data?.map((s) => s.slug) ?? []}
          q={q}
          tag={tag}
          space={within}
          here={space ? spaceHref(org, space) : orgHref(org)}
        />
        {q ? (
          <Results key={`${q}\n${tag}\n${within}`} org={org} q={q} tag={tag} space={within} />
        ) : space ? (
          <Entries key={`${space}\n${tag}`} org={org} space={space} tag={tag} role={role} />
        ) : (
          <p>Choose a space, or search across all of them.</p>
        )}
      </div>
    </div>
  );
}

function NewSpace({ org, onCreated }: { org: string; onCreated: () => void }) {
  const [slug, setSlug] = useState("");
  const [title, setTitle] = useState("");
  const [run, busy, error] = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    let made = "";
    const ok = await run(async () => {
      made = (await createSpace(org, { slug: slug.trim(), ...(title.trim() ? { title: title.trim() } : {}) })).slug;
    });
    if (!ok) return;
    setSlug("");
    setTitle("");
    onCreated();
    navigate(spaceHref(org, made));
  };
  return (
    <form class="kn-newspace" onSubmit={submit} aria-labelledby="kn-newspace">
      <h3 id="kn-newspace">New space</h3>
      <label>
        Space slug
        <input name="space-slug" value={slug} onInput={(e) => setSlug(e.currentTarget.value)} required placeholder="e.g. backend" />
      </label>
      <label>
        Space title
        <input name="space-title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} placeholder="optional" />
      </label>
      <button type="submit" disabled={busy}>
        Create space
      </button>
      <Alert error={error} />
    </form>
  );
}

function SearchForm(p: { spaces: string[]; q: string; tag: string; space: string; here: string }) {
  const [q, setQ] = useState(p.q);
  const [tag, setTag] = useState(p.tag);
  const [space, setSpace] = useState(p.space);
  const submit = (e: Event) => {
    e.preventDefault();
    const s = new URLSearchParams();
    if (q.trim()) s.set("q", q.trim());
    if (tag.trim()) s.set("tag", tag.trim());
    if (q.trim() && space) s.set("space", space);
    const query = s.toString();
    navigate(p.here + (query ? `?${query}` : ""));
  };
  const spaces = p.space && !p.spaces.includes(p.space) ? [...p.spaces, p.space] : p.spaces;
  return (
    <form role="search" class="inline kn-search" onSubmit={submit}>
      <label>
        Search
        <input type="search" name="q" value={q} onInput={(e) => setQ(e.currentTarget.value)} placeholder="words to find" />
      </label>
      <label>
        In space
        <select name="space" value={space} onChange={(e) => setSpace(e.currentTarget.value)}>
          <option value="">All spaces</option>
          {spaces.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Tag
        <input name="tag" value={tag} onInput={(e) => setTag(e.currentTarget.value)} placeholder="any" />
      </label>
      <button type="submit">Search</button>
    </form>
  );
}

function Results({ org, q, tag, space }: { org: string; q: string; tag: string; space: string }) {
  const res = useLoad(() => search(org, q, space, tag), [org, q, tag, space]);
  return (
    <section aria-label="Search results" data-testid="search-results">
      <h2>Results for “{q}”</h2>
      <Alert error={res.error} />
      {res.data &&
        (res.data.length === 0 ? (
          <p>Nothing found.</p>
        ) : (
          <ol class="kn-results">
            {res.data.map((r) => (
              <li key={`${r.space}/${r.slug}`}>
                <a href={entryHref(org, r.space, r.slug)}>{r.title || r.slug}</a>{" "}
                <span class="muted">
                  {r.space} / {r.slug} · version {r.version}
                </span>
                <Snippet html={r.snippet} />
                <Tags tags={r.tags} base={spaceHref(org, r.space)} />
              </li>
            ))}
          </ol>
        ))}
    </section>
  );
}

function Entries({ org, space, tag, role }: { org: string; space: string; tag: string; role: Role }) {
  const first = useLoad(() => listEntries(org, space, tag), [org, space, tag]);
  const [more, setMore] = useState<{ list: Entry[]; done: boolean }>();
  const [run, busy, error] = useAction();
  const all = [...(first.data ?? []), ...(more?.list ?? [])];
  const full = more ? !more.done : first.data?.length === pageSize;
  const loadMore = () =>
    run(async () => {
      const next = await listEntries(org, space, tag, all[all.length - 1].slug);
      setMore({ list: [...(more?.list ?? []), ...next], done: next.length < pageSize });
    });
  return (
    <section aria-label={`Entries in ${space}`} data-testid="entries">
      <h2>Entries{tag && ` tagged ${tag}`}</h2>
      {canWrite(role) && (
        <p>
          <a href={`${spaceHref(org, space)}?new`} class="button">
            New entry
          </a>
        </p>
      )}
      <Alert error={first.error} />
      {first.data &&
        (all.length === 0 ? (
          <p>No entries{tag && ` tagged ${tag}`} yet.</p>
        ) : (
          <ul class="kn-entries">
            {all.map((e) => (
              <li key={e.slug}>
                <a href={entryHref(org, space, e.slug)}>{e.title || e.slug}</a>{" "}
                <span class="muted">
                  {e.slug} · version {e.version}
                </span>
                <Tags tags={e.tags} base={spaceHref(org, space)} />
              </li>
            ))}
          </ul>
        ))}
      {full && (
        <button type="button" class="secondary" onClick={() => void loadMore()} disabled={busy}>
          More entries
        </button>
      )}
      <Alert error={error} />
    </section>
  );
}
