// Ticket: what it asks, where its flow is, its questions, its runs (with a
// run's session and live log: runs/runs.tsx), what its branch changes
// (changes/changes.tsx, loaded with this page only) beside the approval
// that names the head it approves, and its history, live through the
// item:KEY stream.
import { StartHints } from "./starthints";
import { Fragment } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import {
  ApiError,
  enc,
  listEvents,
  permissions,
  tickets,
  type BalletEvent,
  type Changes,
  type Flow,
  type Item,
  type Question,
  type Run,
  type Subscription,
} from "../api";
import { message, useAction, useDebounced, useLoad, type Loaded } from "../load";
import { subscribe } from "../realtime";
import { prefetchTranscript, Report, Runs } from "../runs/runs";
import { Timeline } from "../timeline";
import { waits } from "../cards";
import { Ago, Alert, Badge, Disclosure, epicStates, permissionsOrNone, stateNames, ticketMoves, useConfirm } from "../ui";

interface Details {
  item: Item;
  flow: Flow | null;
  questions: Question[];
  runs: Run[];
  perms: Set<string>;
  subscription: Subscription;
}

export default function Page({ item: key }: Record<string, string>) {
  // The diff viewer's chunk loads at once. The first read of the changes
  // starts with the item's own when the address says the person came to
  // judge the flow (#flow, a run's #run-ID: the ticket has one), else as
  // soon as the item says it has a flow; a run's transcript named by the
  // address is read beside them (no waterfall).
  const early = useRef<{ key: string; changes: Promise<Changes> | null } | null>(null);
  const details = useLoad(async (): Promise<Details> => {
    const readChanges = () => {
      if (early.current?.key === key) return;
      const first = tickets.changes(key);
      first.catch(() => undefined); // its error is the changes' load's
      early.current = { key, changes: first };
    };
    void changesModule().catch(() => undefined);
    if (early.current?.key !== key && /^#(flow|run-)/.test(location.hash)) {
      readChanges();
      if (location.hash.startsWith("#run-")) prefetchTranscript(location.hash.slice(5));
    }
    const item = await tickets.get(key);
    if (item.flow !== null) readChanges();
    const [flow, questions, runs, perms, subscription] = await Promise.all([
      // The item says when it has no flow: no request, no 404 in the console.
      item.flow === null ? null : tickets.flow(key),
      tickets.questions(key),
      tickets.runs(key),
      permissionsOrNone(() => permissions(item.project_id)),
      tickets.subscription(key),
    ]);
    return { item, flow, questions, runs, perms, subscription };
  }, [key]);
  const history = useLoad(() => listEvents(key), [key]);
  const [live, setLive] = useState<BalletEvent[]>([]);
  const [liveError, setLiveError] = useState("");
  const refresh = useDebounced(() => void details.reload(), 200);
  // The changes (and their viewer, a chunk of its own) once the ticket
  // has a flow, read again when the flow moves or a run ends (a push).
  const hasFlow = !!details.data?.flow;
  const changes = useLoad(async () => {
    if (!hasFlow) return null;
    const first = early.current?.key === key ? early.current.changes : null;
    if (first) early.current = { key, changes: null }; // used once
    return first ?? tickets.changes(key);
  }, [key, hasFlow]);
  // (An object: a function as the state would be taken for an updater.)
  const viewer = useLoad(async () => (hasFlow ? { View: (await changesModule()).default } : null), [hasFlow]);
  const refreshChanges = useDebounced(() => void changes.reload(), 200);

  // The timeline: what was read, then every event after it, live.
  useEffect(() => {
    if (!history.data) return;
    setLive([]);
    return subscribe(
      `item:${key}`,
      history.data.last_seq,
      (e) => {
        setLive((es) => [...es, e]);
        refresh();
        if (e.type.startsWith("flow.") || e.type === "run.finished") refreshChanges();
      },
      setLiveError,
    );
  }, [history.data]);
  const events = history.data ? (live.length ? history.data.events.concat(live) : history.data.events) : [];

  const d = details.data;
  const canWrite = d?.perms.has("tracker.write") ?? false;
  // The approval's button is enabled once the changes are read: the
  // anchor's focus waits for them.
  const changesRead = !hasFlow || changes.data != null || changes.error !== "";
  useAnchor(d !== undefined && changesRead);
  return (
    <article class="ticket">
      <Alert error={details.error || history.error} />
      {d && (
        <>
          <Header d={d} canWrite={canWrite} onChange={details.reload} />
          <Body item={d.item} canWrite={canWrite} onChange={details.reload} />
          <FlowSection
            d={d}
            canWrite={canWrite}
            onChange={details.reload}
            changes={changes}
            changesRead={changesRead}
            View={viewer.data?.View ?? null}
            viewError={viewer.error}
          />
          <Questions item={d.item.key} questions={d.questions} canWrite={canWrite} onChange={details.reload} />
          <Runs item={d.item.key} runs={d.runs} />
        </>
      )}
      <section aria-labelledby="timeline-h">
        <h2 id="timeline-h">Timeline</h2>
        <Alert error={liveError && `Live updates stopped: ${liveError}`} />
        <Timeline events={events} />
      </section>
    </article>
  );
}

// anchors are the sections a link may point at (a notification's link, a
// Needs me entry), each with the control where the person acts: the
// first open question's answer box, the approval's first button.
const anchors: Record<string, string> = {
  questions: '[data-open="1"] textarea',
  flow: ".approve button",
};

// useAnchor scrolls to the section the address names (#questions, #flow)
// once the ticket has loaded, and puts the focus on where the person acts
// there. A link to another section of the same ticket does it again.
function useAnchor(loaded: boolean) {
  const hash = location.hash.slice(1);
  const done = useRef("");
  useEffect(() => {
    if (!loaded || !(hash in anchors) || done.current === hash + location.pathname) return;
    const section = document.getElementById(hash);
    if (!section) return;
    done.current = hash + location.pathname;
    section.scrollIntoView({ block: "start" });
    section.querySelector<HTMLElement>(anchors[hash])?.focus({ preventScroll: true });
  });
  useEffect(() => {
    const l = () => (done.current = "");
    addEventListener("hashchange", l);
    addEventListener("popstate", l);
    return () => {
      removeEventListener("hashchange", l);
      removeEventListener("popstate", l);
    };
  }, []);
}

function Header({ d, canWrite, onChange }: { d: Details; canWrite: boolean; onChange: () => Promise<void> }) {
  const it = d.item;
  const [run, busy, error] = useAction();
  const [confirm, dialog] = useConfirm();
  const moves = it.type === "epic" ? epicStates.filter((s) => s !== it.state) : (ticketMoves[it.state] ?? []);
  const move = async (to: string) => {
    // Cancelling stops the ticket's flow and its running session: asked first.
    if (
      to === "cancelled" &&
      !(await confirm({
        title: `Cancel ${it.key}?`,
        body:
          it.type === "epic"
            ? `${it.key} moves to Cancelled. Its tickets keep their states.`
            : `${it.key} moves to Cancelled: its flow stops, a running agent session is stopped and its pull request, when the forge has one, is closed. Moving it back to Backlog later starts over.`,
        confirm: `Cancel ${it.key}`,
        keep: "Keep it",
        danger: true,
      }))
    )
      return;
    await run(() => tickets.move(it, to).then(onChange));
  };
  const start = () => run(() => tickets.start(it.key).then(onChange));
  const subscribed = d.subscription.subscribed;
  const toggle = () => run(() => tickets.subscribe(it.key, !subscribed).then(onChange));
  const project = it.key.slice(0, it.key.lastIndexOf("-"));
  return (
    <header class="ticket-head">
      <p class="muted">
        <a href={`/projects/${enc(project)}`}>{project} board</a>
      </p>
      <h1>
        {it.key} · {it.title}
      </h1>
      <p class="row">
        <Badge kind="type">{it.type}</Badge>
        <span data-testid="state">{stateNames[it.state] ?? it.state}</span>
        {it.epic && (
          <span>
            epic <a href={`/items/${enc(it.epic)}`}>{it.epic}</a>
          </span>
        )}
        <span class="muted">
          created by {it.created_by} <Ago at={it.created_at} />
        </span>
      </p>
      {canWrite && (
        <div class="actions" role="group" aria-label="Move the ticket">
          {moves.map((s) => (
            <button key={s} type="button" disabled={busy} onClick={() => move(s)}>
              Move to {stateNames[s] ?? s}
            </button>
          ))}
          {it.state === "ready" && it.type !== "epic" && d.perms.has("run.manage") && (
            <button type="button" disabled={busy} onClick={start}>
              Start now
            </button>
          )}
        </div>
      )}
      {it.state === "ready" && it.type !== "epic" && <StartHints item={it} />}
      <p class="row">
        <button type="button" disabled={busy} aria-pressed={subscribed} data-testid="subscribe" onClick={toggle}>
          {subscribed ? "Unsubscribe" : "Subscribe"}
        </button>
        <span class="muted">
          {subscribed
            ? "You are told of its questions, approvals, failure and completion."
            : "Subscribe to be told of its questions, approvals, failure and completion."}
        </span>
      </p>
      <Alert error={error} />
      {dialog}
    </header>
  );
}

function Body({ item, canWrite, onChange }: { item: Item; canWrite: boolean; onChange: () => Promise<void> }) {
  const [blocker, setBlocker] = useState("");
  const [run, busy, error] = useAction();
  const add = async (e: Event) => {
    e.preventDefault();
    if (await run(() => tickets.addBlocker(item.key, blocker.trim()).then(onChange))) setBlocker("");
  };
  const remove = (k: string) => run(() => tickets.removeBlocker(item.key, k).then(onChange));
  return (
    <section aria-labelledby="about-h">
      <h2 id="about-h">About</h2>
      <h3>Description</h3>
      <p class="text" data-testid="description">
        {item.description || <span class="muted">No description.</span>}
      </p>
      <h3>Acceptance criteria</h3>
      <p class="text" data-testid="acceptance">
        {item.acceptance_criteria || <span class="muted">None.</span>}
      </p>
      <h3>Blockers</h3>
      {item.blocked_by?.length ? (
        <p data-testid="blocked-by">
          Blocked by <Keys keys={item.blocked_by} />
        </p>
      ) : (
        <p class="muted">Not blocked.</p>
      )}
      {canWrite && (
        <>
          {item.blocked_by?.length ? (
            <div class="actions" role="group" aria-label="Remove a blocker">
              {item.blocked_by.map((k) => (
                <button key={k} type="button" class="secondary" disabled={busy} onClick={() => remove(k)}>
                  Remove blocker {k}
                </button>
              ))}
            </div>
          ) : null}
          <form class="inline" onSubmit={add}>
            <label>
              Blocked by (item key)
              <input value={blocker} placeholder="ACME-1" onInput={(e) => setBlocker((e.target as HTMLInputElement).value)} />
            </label>
            <button type="submit" disabled={busy || !blocker.trim()}>
              Add blocker
            </button>
          </form>
          <Alert error={error} />
        </>
      )}
      {item.blocks?.length ? (
        <p data-testid="blocks">
          Blocks <Keys keys={item.blocks} />
        </p>
      ) : null}
    </section>
  );
}

// Keys links items by key, separated by commas.
function Keys({ keys }: { keys: string[] }) {
  return (
    <>
      {keys.map((k, i) => (
        <Fragment key={k}>
          {i > 0 && ", "}
          <a href={`/items/${enc(k)}`}>{k}</a>
        </Fragment>
      ))}
    </>
  );
}

type FlowGraphView = typeof import("../pipelines/flowgraph").default;
type FlowGraphProps = import("../pipelines/flowgraph").FlowGraphProps;

// StageGraph is the pinned pipeline's graph with the current stage lit;
// its code is loaded when the person opens it.
function StageGraph(props: FlowGraphProps) {
  const [open, setOpen] = useState(false);
  const [View, setView] = useState<FlowGraphView | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    if (!open || View) return;
    import("../pipelines/flowgraph").then(
      (m) => setView(() => m.default),
      (e) => setError(`The graph could not be loaded: ${message(e)}`),
    );
  }, [open]);
  return (
    <details class="flow-graph" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Pipeline graph</summary>
      {open && (View ? <View {...props} /> : error ? <Alert error={error} /> : <p class="muted">Loading the graph…</p>)}
    </details>
  );
}

type ChangesViewer = typeof import("../changes/changes").default;

// changesModule loads the changes' viewer (a chunk of its own, with
// highlight.js) once.
let viewerChunk: Promise<typeof import("../changes/changes")> | null = null;
// A failed load is tried again the next time.
const changesModule = () =>
  (viewerChunk ??= import("../changes/changes").catch((e) => {
    viewerChunk = null;
    throw e;
  }));

// short is a commit id as people read it (changes.tsx has the same, in
// the lazily loaded chunk).
const short = (sha: string) => sha.slice(0, 7);

interface FlowProps {
  d: Details;
  canWrite: boolean;
  onChange: () => Promise<void>;
  changes: Loaded<Changes | null>;
  changesRead: boolean; // read (or failed): the approval names what they show
  View: ChangesViewer | null;
  viewError: string;
}

function FlowSection({ d, canWrite, onChange, changes, changesRead, View, viewError }: FlowProps) {
  const f = d.flow;
  const [comment, setComment] = useState("");
  const [run, busy, error] = useAction();
  if (!f)
    return (
      <section id="flow" aria-labelledby="flow-h">
        <h2 id="flow-h">Flow</h2>
        <p class="muted">Not started.</p>
      </section>
    );
  // The head the page shows is the one decided on ("" when there is no
  // branch or its changes could not be read); a 409 says the branch moved
  // (or the flow did): both are read again and the person sees the new head.
  const c = changes.data;
  const head = c?.head ?? "";
  const decide = (verb: "approve" | "reject") =>
    run(async () => {
      try {
        await tickets.decide(d.item.key, verb, head, comment);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 409)) throw e;
        const [fresh] = await Promise.all([tickets.changes(d.item.key).catch(() => null), onChange()]);
        if (fresh) changes.setData(fresh);
        const moved = fresh && fresh.head !== head;
        throw new Error(
          message(e) +
            (moved
              ? fresh.head
                ? `. The changes below now show the head ${short(fresh.head)}: read them, then decide again.`
                : ". The branch is gone: there is no change to approve."
              : ""),
        );
      }
      setComment("");
      await Promise.all([onChange(), changes.reload()]);
    });
  const waitsApproval = f.status === "waiting" && f.waiting === "approval";
  return (
    <section id="flow" aria-labelledby="flow-h">
      <h2 id="flow-h">Flow</h2>
      <p data-testid="flow-status">
        Pipeline {f.pipeline} v{f.pipeline_version} · stage <strong>{f.stage}</strong> · iteration {f.iteration} of {f.max_iterations} ·{" "}
        {f.status}
        {f.waiting && <> · {waits(f)}</>}
        {f.attention && (
          <>
            {" "}
            <Badge kind="attention">{f.attention === "no_runner" ? "no runner can run it" : f.attention}</Badge>
          </>
        )}
        {waitsApproval && f.escalated_at && (
          <>
            {" "}
            <span data-testid="flow-escalated">
              <Badge kind="attention">escalated</Badge> to the project's admins <Ago at={f.escalated_at} />
            </span>
          </>
        )}
      </p>
      <ol class="stages" aria-label="Stages">
        {f.stages.map((s) => (
          <li key={s.id} aria-current={s.id === f.stage ? "step" : undefined} class={s.id === f.stage ? "current" : ""}>
            {s.name || s.id} <span class="muted">({s.kind})</span>
          </li>
        ))}
      </ol>
      <StageGraph project={d.item.project_id} pipeline={f.pipeline} version={f.pipeline_version} current={f.stage} />
      {f.report && (
        <>
          <h3>Last report{f.outcome ? ` (${f.outcome})` : ""}</h3>
          <Report src={f.report} label="Last report" />
        </>
      )}
      {waitsApproval && f.nothing_to_approve && (
        <p class="text" data-testid="nothing-to-approve">
          Nothing to approve: the branch has no commit ahead of its base, so there is no change to review. Reject to send the ticket back.
        </p>
      )}
      <Alert error={changes.error && `The changes cannot be read: ${changes.error}`} />
      <Alert error={viewError} />
      {c && View && <View c={c} />}
      {waitsApproval && canWrite && (
        <div class="approve" data-testid="approve-form">
          <label for="decision-comment">Comment (optional)</label>
          <textarea id="decision-comment" rows={2} value={comment} onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)} />
          <div class="actions">
            {!f.nothing_to_approve && (
              <button type="button" disabled={busy || !changesRead} onClick={() => decide("approve")} title={head ? `Approve the head ${head}` : undefined}>
                {head ? `Approve ${short(head)}` : "Approve"}
              </button>
            )}
            <button type="button" class="danger" disabled={busy || !changesRead} onClick={() => decide("reject")}>
              Reject
            </button>
          </div>
        </div>
      )}
      <Alert error={error} />
    </section>
  );
}

function Questions({ item, questions, canWrite, onChange }: { item: string; questions: Question[]; canWrite: boolean; onChange: () => Promise<void> }) {
  const [text, setText] = useState("");
  const [blocking, setBlocking] = useState(false);
  const [run, busy, error] = useAction();
  const ask = async (e: Event) => {
    e.preventDefault();
    if (await run(() => tickets.ask(item, text, blocking).then(onChange))) {
      setText("");
      setBlocking(false);
    }
  };
  return (
    <section id="questions" aria-labelledby="questions-h">
      <h2 id="questions-h">Questions</h2>
      {!questions.length && <p class="muted">No questions.</p>}
      <ul class="questions">
        {questions.map((q) => (
          <QuestionView key={q.id} q={q} canWrite={canWrite} onChange={onChange} />
        ))}
      </ul>
      {canWrite && (
        <Disclosure summary="Ask a question">
          <form onSubmit={ask} aria-label="Ask a question">
            <label>
              Question
              <textarea rows={2} required value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
            </label>
            <label class="check">
              <input type="checkbox" checked={blocking} onChange={(e) => setBlocking((e.target as HTMLInputElement).checked)} /> Blocking: the flow waits
              for the answer
            </label>
            <Alert error={error} />
            <button type="submit" disabled={busy || !text.trim()}>
              Ask
            </button>
          </form>
        </Disclosure>
      )}
    </section>
  );
}

function QuestionView({ q, canWrite, onChange }: { q: Question; canWrite: boolean; onChange: () => Promise<void> }) {
  const [answer, setAnswer] = useState("");
  const [run, busy, error] = useAction();
  const id = `answer-${q.id}`;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await run(() => tickets.answer(q.id, answer))) {
      setAnswer("");
      await onChange();
    }
  };
  return (
    <li class="card" data-testid="question" data-open={q.answer === null ? "1" : "0"}>
      <p class="text">
        {q.blocking && <Badge kind="question">blocking</Badge>}{" "}
        {q.answer === null && q.escalated_at && (
          <span data-testid="question-escalated">
            <Badge kind="attention">escalated</Badge>{" "}
          </span>
        )}
        {q.text}
      </p>
      <p class="muted">
        asked by {q.asked_by.subject} <Ago at={q.asked_at} />
      </p>
      {q.answer !== null ? (
        <p class="text">
          <strong>Answer</strong> by {q.answered_by}: {q.answer}
        </p>
      ) : canWrite ? (
        <form onSubmit={submit}>
          <label for={id}>Your answer</label>
          <textarea id={id} rows={2} required value={answer} onInput={(e) => setAnswer((e.target as HTMLTextAreaElement).value)} />
          <Alert error={error} />
          <button type="submit" disabled={busy || !answer.trim()}>
            Answer
          </button>
        </form>
      ) : (
        <p class="muted">Not answered yet.</p>
      )}
    </li>
  );
}
