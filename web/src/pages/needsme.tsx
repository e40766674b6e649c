// Needs me: what waits for the signed-in person across the projects they
// can see, oldest first, each one click from where it is resolved.
import { useEffect, useState } from "preact/hooks";
import { enc, get, post, type NeedsMeEntry, type Organization } from "../api";
import { useAction, useDebounced, useLoad } from "../load";
import { subscribe } from "../realtime";
import { Ago, Alert, Badge } from "../ui";

const kinds: Record<string, string> = {
  question: "Question",
  approval: "Approval",
  review: "Review",
  merge: "Merge",
  stuck: "Stuck",
  no_runner: "No runner",
  budget: "Budget",
  pause: "Paused",
  mail_failing: "Mail failing",
  webhook_failing: "Webhook failing",
};

// where is the page that resolves an entry.
function where(e: NeedsMeEntry): { href: string; label: string } {
  const item = `/items/${enc(e.item)}`;
  switch (e.kind) {
    case "mail_failing":
      return { href: "/platform#mail", label: "Mail status" };
    case "webhook_failing":
      // A project's hook is managed in its settings, an organization's
      // with the organization.
      return e.project
        ? { href: `/projects/${enc(e.project)}/settings#webhooks`, label: `${e.project} webhooks` }
        : { href: `/orgs#webhooks-${enc(e.org)}`, label: `${e.org} webhooks` };
    case "question":
      return { href: `${item}#questions`, label: `Answer on ${e.item}` };
    case "approval":
      return { href: `${item}#flow`, label: `Approve or reject ${e.item}` };
    case "budget":
    case "pause":
      return { href: `/projects/${enc(e.project)}/settings`, label: `${e.project} settings` };
    case "stuck":
      // A stuck flow asked a question: its answer runs the stage again.
      return { href: `${item}#questions`, label: `Unstick ${e.item}` };
    default:
      return { href: `${item}#flow`, label: `Open ${e.item}` };
  }
}

export default function Page() {
  const { data, error, reload } = useLoad(() => get<{ items: NeedsMeEntry[]; truncated?: boolean }>("/api/v1/needs-me"), []);
  const orgs = useLoad(() => get<{ organizations: Organization[] }>("/api/v1/orgs"), []);
  const later = useDebounced(() => void reload(), 300);

  // Anything that happens in the person's organizations may change the list.
  // Someone with a role in single projects only may not follow a whole
  // organization: the list is then read again every 30 s.
  const [poll, setPoll] = useState(false);
  useEffect(() => {
    const stops = (orgs.data?.organizations ?? []).map((o) => subscribe(`org:${o.slug}`, undefined, later, () => setPoll(true)));
    return () => stops.forEach((s) => s());
  }, [orgs.data]);
  useEffect(() => {
    if (!poll) return;
    const t = window.setInterval(() => void reload(), 30000);
    return () => clearInterval(t);
  }, [poll]);

  const items = data?.items ?? [];
  return (
    <section>
      <h1>Needs me</h1>
      <Alert error={error || orgs.error} />
      {data && !items.length && (
        <div class="empty" data-testid="needs-me-empty">
          <p class="what">Nothing waits for you.</p>
          <p class="muted">
            When an agent asks a question or a ticket waits for your approval, review or merge, it appears here. Meanwhile, start
            work from <a href="/orgs">your projects' boards</a>.
          </p>
        </div>
      )}
      {data?.truncated && <p class="notice">More waits for you than one list shows: the oldest come first.</p>}
      <ol class="needs" data-testid="needs-me">
        {items.map((e) => (
          <Entry key={`${e.kind}:${e.item}:${e.question?.id ?? ""}:${e.webhook ?? ""}`} e={e} onDone={reload} />
        ))}
      </ol>
    </section>
  );
}

function Entry({ e, onDone }: { e: NeedsMeEntry; onDone: () => Promise<void> }) {
  const w = where(e);
  const [answer, setAnswer] = useState("");
  const [run, busy, error] = useAction();
  const id = `answer-${e.question?.id}`;
  const submit = async (ev: Event) => {
    ev.preventDefault();
    if (await run(() => post(`/api/v1/questions/${enc(e.question!.id)}/answer`, { answer }))) {
      setAnswer("");
      await onDone();
    }
  };
  return (
    <li class="card" data-testid="needs-me-entry" data-kind={e.kind} data-item={e.item} data-webhook={e.webhook} data-nav>
      <div class="row">
        <Badge kind={e.item ? e.kind : "attention"}>{kinds[e.kind] ?? e.kind}</Badge>
        {e.item && <a href={`/items/${enc(e.item)}`}>{e.item}</a>}
        <span class="title">{e.title}</span>
        <span class="muted">
          {e.project || e.org}
          {e.stage ? ` · stage ${e.stage}` : ""} · <Ago at={e.since} />
        </span>
      </div>
      {e.detail && <p class="detail">{e.detail}</p>}
      {e.kind === "question" && e.question ? (
        <form onSubmit={submit} class="answer">
          <p class="question">{e.question.text}</p>
          <label for={id}>Answer to {e.item}</label>
          <textarea id={id} rows={2} required value={answer} onInput={(x) => setAnswer((x.target as HTMLTextAreaElement).value)} />
          <Alert error={error} />
          <button type="submit" disabled={busy || !answer.trim()}>
            Answer
          </button>
        </form>
      ) : (
        <a href={w.href} data-open>
          {w.label}
        </a>
      )}
    </li>
  );
}
