// An entry: its rendered Markdown, editing with a live preview (saving the
// version it was based on), delete and undelete, and its history with diffs
// and restore; and the form for a new entry.
import { useState } from "preact/hooks";
import { ApiError } from "../api";
import { message, useAction, useLoad } from "../load";
import { navigate } from "../router";
import { Ago, Alert } from "../ui";
import * as api from "./api";
import type { Diff, Entry, Role } from "./api";
import { DiffView, Markdown } from "./render";
import { canWrite, entryHref, spaceHref, Tags } from "./ui";

interface Props {
  org: string;
  space: string;
  slug: string;
  mode: "view" | "edit" | "history";
  version?: number; // an old version to show
  role: Role;
}

export function EntryPage({ org, space, slug, mode, version, role }: Props) {
  const e = useLoad(() => api.readEntry(org, space, slug, version), [org, space, slug, version]);
  const [run, busy, error] = useAction();
  const [status, setStatus] = useState("");
  const writer = canWrite(role) && !version; // an old version is read only
  const here = (q = "") => entryHref(org, space, slug, q);

  if (e.error && !e.data) {
    return (
      <article>
        <h1>{slug}</h1>
        <Alert error={e.error} />
      </article>
    );
  }
  const entry = e.data;
  if (!entry) return <p>Loading…</p>;
  const act = async (what: () => Promise<Entry>, done: string) => {
    setStatus("");
    if (await run(async () => e.setData(await what()))) setStatus(done);
  };
  if (mode === "edit" && writer && !entry.deleted) {
    return (
      <Editor
        org={org}
        entry={entry}
        onSaved={(saved) => {
          e.setData(saved);
          navigate(here());
        }}
      />
    );
  }
  return (
    <article class="kn-entry" data-testid="entry">
      <h1>{entry.title || entry.slug}</h1>
      <p class="muted">
        Version <span data-testid="entry-version">{entry.version}</span> · by {entry.updated_by} · <Ago at={entry.updated_at} />
        {entry.note && <> · “{entry.note}”</>}
      </p>
      <Tags tags={entry.tags} base={spaceHref(org, space)} />
      {version && (
        <p class="notice">
          This is version {entry.version}, not necessarily the current one. <a href={here()}>Current version</a>
        </p>
      )}
      {entry.deleted && <p class="notice">This entry is deleted.</p>}
      <div class="actions">
        {writer && !entry.deleted && mode !== "edit" && (
          <a class="button" href={here("?edit")}>
            Edit
          </a>
        )}
        {mode === "history" ? (
          <a class="button" href={here()}>
            Back to the entry
          </a>
        ) : (
          <a class="button" href={here("?history")}>
            History
          </a>
        )}
        {writer && !entry.deleted && (
          <button type="button" class="danger" onClick={() => act(() => api.deleteEntry(org, space, slug), "Entry deleted.")} disabled={busy}>
            Delete
          </button>
        )}
        {writer && entry.deleted && (
          <button type="button" onClick={() => act(() => api.undeleteEntry(org, space, slug), "Entry undeleted.")} disabled={busy}>
            Undelete
          </button>
        )}
      </div>
      <Alert error={error || e.error} />
      <p role="status" class="kn-status">
        {status}
      </p>
      {mode === "history" ? (
        <History org={org} entry={entry} writer={writer} onRestored={e.setData} onReload={() => void e.reload()} />
      ) : (
        <Markdown src={entry.body} label="Entry text" />
      )}
    </article>
  );
}

interface Draft {
  title: string;
  tags: string;
  body: string;
}

const tagList = (s: string) => [...new Set(s.split(",").map((t) => t.trim()).filter(Boolean))];
const draftOf = (e: Entry): Draft => ({ title: e.title, tags: (e.tags ?? []).join(", "), body: e.body });

// Fields are the parts of an entry a person writes, with the live preview.
function Fields({ d, set }: { d: Draft; set: (d: Draft) => void }) {
  return (
    <div class="kn-edit">
      <div class="kn-fields">
        <label>
          Title
          <input name="title" value={d.title} onInput={(e) => set({ ...d, title: e.currentTarget.value })} required />
        </label>
        <label>
          Tags (comma-separated)
          <input name="tags" value={d.tags} onInput={(e) => set({ ...d, tags: e.currentTarget.value })} />
        </label>
        <label>
          Text (Markdown)
          <textarea name="body" rows={20} value={d.body} onInput={(e) => set({ ...d, body: e.currentTarget.value })} />
        </label>
      </div>
      <section class="kn-preview" aria-labelledby="kn-preview">
        <h2 id="kn-preview">Preview</h2>
        <Markdown src={d.body} label="Preview of the text" />
      </section>
    </div>
  );
}

function Editor({ org, entry, onSaved }: { org: string; entry: Entry; onSaved: (e: Entry) => void }) {
  const [d, setD] = useState<Draft>(draftOf(entry));
  const [note, setNote] = useState("");
  const [based, setBased] = useState(entry.version);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [theirs, setTheirs] = useState<Entry>(); // saved by someone else meanwhile
  const [mine, setMine] = useState<Draft>(); // what was set aside to load theirs

  const save = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setError("");
    try {
      onSaved(await api.saveEntry(org, entry.space, entry.slug, based, { title: d.title, body: d.body, tags: tagList(d.tags), note: note.trim() || undefined }));
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        try {
          setTheirs(await api.readEntry(org, entry.space, entry.slug));
        } catch (err2) {
          setError(message(err2));
        }
      } else setError(message(err));
    } finally {
      setBusy(false);
    }
  };
  const loadTheirs = () => {
    if (!theirs) return;
    setMine(d);
    setD(draftOf(theirs));
    setBased(theirs.version);
    setTheirs(undefined);
  };
  return (
    <form class="kn-editor" onSubmit={save} aria-labelledby="kn-editing">
      <h1 id="kn-editing">Edit {entry.title || entry.slug}</h1>
      <p class="muted">
        Based on version <span data-testid="based-on">{based}</span>
      </p>
      {theirs && (
        <div role="alert" class="alert">
          Someone saved this entry meanwhile: version {theirs.version}, by {theirs.updated_by}. Your changes are not saved.{" "}
          <button type="button" onClick={loadTheirs}>
            Load their version
          </button>
        </div>
      )}
      <Alert error={error} />
      <Fields d={d} set={setD} />
      <label>
        Change note
        <input name="note" value={note} onInput={(e) => setNote(e.currentTarget.value)} placeholder="what changed, and why" />
      </label>
      <div class="actions">
        <button type="submit" disabled={busy || !!theirs}>
          Save
        </button>
        <a class="button secondary" href={entryHref(org, entry.space, entry.slug)}>
          Cancel
        </a>
      </div>
      {mine && (
        <details class="kn-mine">
          <summary>Your unsaved text</summary>
          <p>Their version is loaded above; copy what you want to keep from yours.</p>
          <p>Title: {mine.title}</p>
          <p>Tags: {mine.tags}</p>
          <pre>{mine.body}</pre>
        </details>
      )}
    </form>
  );
}

export function NewEntry({ org, space }: { org: string; space: string }) {
  const [slug, setSlug] = useState("");
  const [d, setD] = useState<Draft>({ title: "", tags: "", body: "" });
  const [run, busy, error] = useAction();
  const create = async (ev: Event) => {
    ev.preventDefault();
    let made = "";
    const ok = await run(async () => {
      made = (await api.createEntry(org, space, { slug: slug.trim(), title: d.title, body: d.body, tags: tagList(d.tags) })).slug;
    });
    if (ok) navigate(entryHref(org, space, made), true);
  };
  return (
    <form class="kn-editor" onSubmit={create} aria-labelledby="kn-new">
      <h1 id="kn-new">New entry in {space}</h1>
      <Alert error={error} />
      <label>
        Slug
        <input name="slug" value={slug} onInput={(e) => setSlug(e.currentTarget.value)} required placeholder="e.g. conventions/go-errors" />
      </label>
      <Fields d={d} set={setD} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          Create entry
        </button>
        <a class="button secondary" href={spaceHref(org, space)}>
          Cancel
        </a>
      </div>
    </form>
  );
}

function History(p: { org: string; entry: Entry; writer: boolean; onRestored: (e: Entry) => void; onReload: () => void }) {
  const { org, entry } = p;
  const vs = useLoad(() => api.versions(org, entry.space, entry.slug), [org, entry.space, entry.slug, entry.version]);
  const [pick, setPick] = useState<{ from?: number; to?: number }>({});
  const [shown, setShown] = useState<Diff>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ text: string; stale: boolean }>();
  const [status, setStatus] = useState("");
  const list = vs.data ?? [];
  const to = pick.to ?? list[0]?.version;
  const from = pick.from ?? list[1]?.version ?? to;

  const run = async (what: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    setStatus("");
    try {
      await what();
    } catch (err) {
      setError({ text: message(err), stale: err instanceof ApiError && err.status === 409 });
    } finally {
      setBusy(false);
    }
  };
  const showDiff = () => run(async () => setShown(await api.diff(org, entry.space, entry.slug, from!, to!)));
  const restore = (v: number) =>
    run(async () => {
      const n = await api.restore(org, entry.space, entry.slug, v, entry.version);
      setStatus(`Restored version ${v} as version ${n.version}.`);
      setPick({});
      setShown(undefined);
      p.onRestored(n);
    });

  return (
    <section aria-labelledby="kn-history" data-testid="history">
      <h2 id="kn-history">History</h2>
      <Alert error={vs.error} />
      {error && (
        <div role="alert" class="alert">
          {error.text}
          {error.stale && (
            <>
              {" "}
              Someone saved this entry meanwhile.{" "}
              <button type="button" onClick={p.onReload}>
                Load the newest version
              </button>
            </>
          )}
        </div>
      )}
      <p role="status" class="kn-status">
        {status}
      </p>
      {list.length > 0 && (
        <>
          <div class="scroll">
            <table class="kn-versions">
              <caption>Versions, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Version</th>
                  <th scope="col">Title</th>
                  <th scope="col">Author</th>
                  <th scope="col">When</th>
                  <th scope="col">Note</th>
                  <th scope="col">From</th>
                  <th scope="col">To</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {list.map((v) => (
                  <tr key={v.version} data-version={v.version} class={v.version === entry.version ? "current" : undefined}>
                    <th scope="row">{v.version}</th>
                    <td>{v.title}</td>
                    <td>{v.author}</td>
                    <td>
                      <Ago at={v.at} />
                    </td>
                    <td>{v.note}</td>
                    <td>
                      <input
                        type="radio"
                        name="kn-from"
                        aria-label={`Compare from version ${v.version}`}
                        checked={from === v.version}
                        onChange={() => setPick({ from: v.version, to })}
                      />
                    </td>
                    <td>
                      <input
                        type="radio"
                        name="kn-to"
                        aria-label={`Compare to version ${v.version}`}
                        checked={to === v.version}
                        onChange={() => setPick({ from, to: v.version })}
                      />
                    </td>
                    <td>
                      <div class="kn-row">
                        <a href={entryHref(org, entry.space, entry.slug, `?version=${v.version}`)} aria-label={`View version ${v.version}`}>
                          View
                        </a>
                        {p.writer && v.version !== entry.version && (
                          <button type="button" class="secondary" onClick={() => restore(v.version)} disabled={busy} aria-label={`Restore version ${v.version}`}>
                            Restore
                          </button>
                        )}
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <p>
            <button type="button" onClick={showDiff} disabled={busy || from === undefined || from === to}>
              Show changes
            </button>
          </p>
          {shown && <DiffView diff={shown.diff} from={shown.from} to={shown.to} />}
        </>
      )}
    </section>
  );
}
