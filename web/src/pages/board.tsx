// Board: a project's tickets by state, filtered by type, epic and words of
// the title; create a ticket, move one to ready; each card shows its
// flow's stage and waiting, what its runs cost so far and, when the
// ticket waits for a person, a "needs you" mark. j/k walk the cards.
import { useEffect, useState } from "preact/hooks";
import { enc, get, listItems, patch, permissions, post, type Item, type Project } from "../api";
import { cost, needsYou } from "../cards";
import { useAction, useDebounced, useLoad } from "../load";
import { subscribe } from "../realtime";
import { Alert, Badge, Disclosure, FlowLine, permissionsOrNone, stateNames } from "../ui";

const columns = ["backlog", "ready", "in_progress", "waiting_for_answer", "paused", "done", "cancelled"];
const shown = 100; // cards per column before "Show all"

export default function Page({ project }: Record<string, string>) {
  const q = new URLSearchParams(location.search);
  const [type, setType] = useState(q.get("type") ?? "");
  const [epic, setEpic] = useState(q.get("epic") ?? "");
  const [text, setText] = useState(q.get("q") ?? "");
  useEffect(() => {
    const p = new URLSearchParams();
    if (type) p.set("type", type);
    if (epic) p.set("epic", epic);
    if (text) p.set("q", text);
    const s = p.toString();
    history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
  }, [type, epic, text]);

  const base = useLoad(async () => {
    const [proj, perms, epics] = await Promise.all([
      get<Project>(`/api/v1/projects/${enc(project)}`),
      permissionsOrNone(() => permissions(project)),
      listItems(project, { type: "epic" }),
    ]);
    return { proj, perms, epics };
  }, [project]);
  const items = useLoad(() => {
    const f: Record<string, string> = {};
    if (type) f.type = type;
    if (epic) f.epic = epic;
    return listItems(project, f);
  }, [project, type, epic]);

  const later = useDebounced(() => void items.reload(), (items.data?.length ?? 0) > 1000 ? 3000 : 300);
  useEffect(() => subscribe(`project:${project}`, undefined, later, () => {}), [project]);

  const proj = base.data?.proj;
  const canWrite = base.data?.perms.has("tracker.write") ?? false;
  const byState = new Map<string, Item[]>(columns.map((c) => [c, []]));
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const shownItems = (items.data ?? []).filter((it) => words.every((w) => it.title.toLowerCase().includes(w) || it.key.toLowerCase().includes(w)));
  for (const it of shownItems) byState.get(it.state)?.push(it);
  const filtered = !!(type || epic || words.length);
  const clear = () => {
    setType("");
    setEpic("");
    setText("");
  };

  return (
    <section class="board">
      <h1>{proj ? `${proj.key} · ${proj.name}` : project}</h1>
      <Alert error={base.error || items.error} />
      {proj?.paused && (
        <p class="notice">
          This project is paused: no ticket starts until it is resumed in <a href={`/projects/${enc(project)}/settings`}>Settings</a>.
        </p>
      )}
      <div class="toolbar">
        <label>
          Type{" "}
          <select value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
            <option value="">All types</option>
            {proj?.ticket_types.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
            <option value="epic">epic</option>
          </select>
        </label>
        <label>
          Epic{" "}
          <select value={epic} onChange={(e) => setEpic((e.target as HTMLSelectElement).value)}>
            <option value="">All epics</option>
            {base.data?.epics.map((e) => (
              <option key={e.key} value={e.key}>
                {e.key} {e.title}
              </option>
            ))}
          </select>
        </label>
        <label>
          Filter{" "}
          <input type="search" value={text} placeholder="Title or key" data-search onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        </label>
        <span class="muted count" data-testid="count">
          {items.data ? (shownItems.length === items.data.length ? `${items.data.length} items` : `${shownItems.length} of ${items.data.length} items`) : ""}
        </span>
      </div>
      {canWrite && proj && <CreateTicket project={proj} epics={base.data?.epics ?? []} onCreated={items.reload} />}
      {items.data && !shownItems.length && (
        <div class="empty" data-testid="board-empty">
          {filtered ? (
            <>
              <p class="what">No ticket matches these filters.</p>
              <p>
                <button type="button" class="secondary" onClick={clear}>
                  Clear the filters
                </button>
              </p>
            </>
          ) : (
            <>
              <p class="what">No tickets yet.</p>
              {canWrite ? (
                <>
                  <p class="muted">Describe a piece of work and mark it ready: the project's pipeline takes it from there.</p>
                  <p>
                    <button type="button" onClick={openCreate}>
                      Create the first ticket
                    </button>
                  </p>
                </>
              ) : (
                <p class="muted">Someone with write access to this project creates its tickets; they will show up here.</p>
              )}
            </>
          )}
        </div>
      )}
      <div class="columns" data-testid="board" role="region" aria-label="Tickets by state" tabIndex={0}>
        {columns.map((c) => (
          <Column key={c} state={c} items={byState.get(c)!} canWrite={canWrite} onChange={items.reload} />
        ))}
      </div>
    </section>
  );
}

function Column({ state, items, canWrite, onChange }: { state: string; items: Item[]; canWrite: boolean; onChange: () => Promise<void> }) {
  const [all, setAll] = useState(false);
  const list = all ? items : items.slice(0, shown);
  const id = `col-${state}`;
  return (
    <section class="column" aria-labelledby={id} data-testid={`column-${state}`}>
      <h2 id={id}>
        {stateNames[state]} <span class="n">{items.length}</span>
      </h2>
      {!items.length && <p class="none">None</p>}
      <ul>
        {list.map((it) => (
          <Card key={it.id} it={it} canWrite={canWrite} onChange={onChange} />
        ))}
      </ul>
      {!all && items.length > shown && (
        <button type="button" onClick={() => setAll(true)}>
          Show all {items.length}
        </button>
      )}
    </section>
  );
}

function Card({ it, canWrite, onChange }: { it: Item; canWrite: boolean; onChange: () => Promise<void> }) {
  const [run, busy, error] = useAction();
  const ready = () => run(() => patch(`/api/v1/items/${enc(it.key)}`, { version: it.version, state: "ready" }).then(onChange));
  const need = needsYou(it.flow);
  const spent = it.flow?.cost_usd ?? 0;
  return (
    <li class={"card" + (need ? " needs-you" : "")} data-testid="card" data-key={it.key} data-state={it.state} data-nav data-needs-you={need || undefined}>
      <div class="row">
        <a href={`/items/${enc(it.key)}`} data-open>
          {it.key}
        </a>
        <Badge kind="type">{it.type}</Badge>
        {it.blocked_by?.length ? <Badge kind="blocked">blocked</Badge> : null}
        {need && (
          <span class="badge badge-needs-you" data-testid="needs-you" title={`This ticket waits for a person to ${need}`}>
            Needs you: {need}
          </span>
        )}
      </div>
      <p class="title">{it.title}</p>
      {it.epic && <p class="muted">epic {it.epic}</p>}
      <FlowLine flow={it.flow} />
      {it.flow && (
        <p class="meta">
          <span class="cost" data-testid="cost" title="What this ticket's agent runs cost so far">
            {cost(spent)} so far
          </span>
        </p>
      )}
      <Alert error={error} />
      {canWrite && it.type !== "epic" && (it.state === "backlog" || it.state === "paused") && (
        <button type="button" class="secondary small" onClick={ready} disabled={busy}>
          Move {it.key} to ready
        </button>
      )}
    </li>
  );
}

// openCreate opens the "Create a ticket" form and puts the cursor in it.
function openCreate() {
  const d = document.querySelector<HTMLDetailsElement>("details.create");
  if (!d) return;
  const focus = () => d.querySelector<HTMLElement>("input, select, textarea")?.focus();
  d.scrollIntoView({ block: "nearest" });
  if (d.open) return focus();
  // The form exists once the disclosure has seen its toggle and rendered.
  d.addEventListener("toggle", () => setTimeout(focus), { once: true });
  d.open = true;
}

function CreateTicket({ project, epics, onCreated }: { project: Project; epics: Item[]; onCreated: () => Promise<void> }) {
  const empty = { type: project.ticket_types[0] ?? "task", title: "", description: "", acceptance_criteria: "", epic: "", ready: false };
  const [f, setF] = useState(empty);
  const [created, setCreated] = useState("");
  const [run, busy, error] = useAction();
  const set = (k: keyof typeof empty) => (e: Event) => {
    const t = e.target as HTMLInputElement;
    setF({ ...f, [k]: t.type === "checkbox" ? t.checked : t.value });
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { type: f.type, title: f.title };
    if (f.description) body.description = f.description;
    if (f.acceptance_criteria) body.acceptance_criteria = f.acceptance_criteria;
    if (f.epic && f.type !== "epic") body.epic = f.epic;
    if (f.ready) body.state = "ready";
    let key = "";
    if (await run(async () => (key = (await post<Item>(`/api/v1/projects/${enc(project.key)}/items`, body)).key))) {
      setF({ ...empty, type: f.type });
      setCreated(key);
      await onCreated();
    }
  };
  return (
    <Disclosure summary="Create a ticket">
      <form onSubmit={submit} aria-label="Create a ticket">
        <label>
          Type
          <select value={f.type} onChange={set("type")}>
            {project.ticket_types.map((t) => (
              <option key={t}>{t}</option>
            ))}
            <option value="epic">epic</option>
          </select>
        </label>
        <label>
          Title
          <input required maxLength={200} value={f.title} onInput={set("title")} />
        </label>
        <label>
          Description
          <textarea rows={4} value={f.description} onInput={set("description")} />
        </label>
        <label>
          Acceptance criteria
          <textarea rows={3} value={f.acceptance_criteria} onInput={set("acceptance_criteria")} />
        </label>
        {f.type !== "epic" && (
          <label>
            Epic
            <select value={f.epic} onChange={set("epic")}>
              <option value="">None</option>
              {epics.map((e) => (
                <option key={e.key} value={e.key}>
                  {e.key} {e.title}
                </option>
              ))}
            </select>
          </label>
        )}
        <label class="check">
          <input type="checkbox" checked={f.ready} onChange={set("ready")} /> Ready to start
        </label>
        <Alert error={error} />
        <button type="submit" disabled={busy || !f.title.trim()}>
          Create
        </button>
        {created && (
          <p role="status">
            Created <a href={`/items/${enc(created)}`}>{created}</a>.
          </p>
        )}
      </form>
    </Disclosure>
  );
}
