// A ticket's history as lines for people, one per event (docs/events.md).
import type { BalletEvent } from "./api";
import { usd } from "./ui";

function who(e: BalletEvent): string {
  if (e.actor_kind === "system") return e.actor_sub;
  if (e.actor_sub.startsWith("run:")) return "agent session";
  return e.acting_for ? `${e.actor_sub} for ${e.acting_for}` : e.actor_sub;
}

function clip(s: unknown, n = 200): string {
  const t = String(s ?? "");
  return t.length > n ? t.slice(0, n) + "…" : t;
}

export function describe(e: BalletEvent): string {
  const p = e.payload ?? {};
  switch (e.type) {
    case "ticket.created":
    case "epic.created":
      return `created “${clip(p.title)}” in ${p.state}`;
    case "ticket.updated":
    case "epic.updated":
      return `changed ${Object.keys(p.changes ?? {}).join(", ")}`;
    case "ticket.state_changed":
    case "epic.state_changed":
      return `moved from ${p.from} to ${p.to}`;
    case "ticket.blocker_added":
    case "epic.blocker_added":
      return `blocked by ${p.blocker}`;
    case "ticket.blocker_removed":
    case "epic.blocker_removed":
      return `no longer blocked by ${p.blocker}`;
    case "question.asked":
      return `asked${p.blocking ? " (blocking)" : ""}: ${clip(p.text)}`;
    case "question.answered":
      return `answered: ${clip(p.answer)}`;
    case "flow.started":
      return `flow started on pipeline ${p.pipeline} v${p.pipeline_version}`;
    case "flow.stage_started":
      return `stage ${p.stage} started (${p.kind}, iteration ${p.iteration})${p.waiting ? `, waits for ${p.waiting}` : ""}`;
    case "flow.stage_finished":
      return `stage ${p.stage} ended ${p.outcome}${p.next ? ` → ${p.next}` : ""}${p.report ? `: ${clip(p.report)}` : ""}`;
    case "flow.waiting":
      return `waits for ${p.waiting}${mergeOf(p.pull_request)}${p.reason ? `: ${clip(p.reason)}` : ""}`;
    case "flow.stuck":
      return `stuck: ${clip(p.reason)}`;
    case "flow.resumed":
      return `resumed${p.reason ? `: ${clip(p.reason)}` : ""}`;
    case "flow.done":
      return `flow done${p.report ? `: ${clip(p.report)}` : ""}`;
    case "flow.failed":
      return `flow failed${p.reason ? `: ${clip(p.reason)}` : ""}`;
    case "flow.stopped":
      return `flow stopped (ticket ${p.ticket_state})${p.reason ? `: ${clip(p.reason)}` : ""}`;
    case "question.escalated":
      return `escalated to the project's admins, unanswered after ${p.after}: ${clip(p.text)}`;
    case "flow.approval_escalated":
      return `escalated to the project's admins: stage ${p.stage} waited for an approval longer than ${p.after}`;
    case "flow.runner_missing":
      return `no runner takes the run of stage ${p.stage} (adapter ${p.adapter})`;
    case "run.created":
      return `run queued for stage ${p.stage} (${p.adapter}${p.model ? ", " + p.model : ""})`;
    case "run.started":
      return `run started on runner ${p.runner}`;
    case "run.reported":
      return `run reported ${p.outcome}: ${clip(p.summary)}`;
    case "run.question_asked":
      return `run asked: ${clip(p.text)}`;
    case "run.finished":
      return `run ${p.status}${p.reason ? ` (${String(p.reason).replaceAll("_", " ")})` : ""}${p.outcome ? ` (${p.outcome})` : ""}${p.usage ? `, ${usd(p.usage.cost_usd)}` : ""}${p.error ? `: ${clip(p.error)}` : ""}`;
    case "run.cancelled":
      return `run cancelled: ${clip(p.reason)}`;
    case "run.cancel_requested":
      return `run asked to stop: ${clip(p.reason)}`;
    default:
      return e.type;
  }
}

// mergeOf names a merge stage's merge: the pull request on a forge, the
// merge into the base branch on plain git (number 0: there is no pull
// request).
function mergeOf(pr: { number?: number; url?: string; base?: string; branch?: string } | undefined): string {
  if (!pr) return "";
  if (pr.number) return ` (pull request #${pr.number})`;
  return ` (merge ${pr.branch ?? "the branch"} into ${pr.base ?? "the base branch"})`;
}

export function Timeline({ events }: { events: BalletEvent[] }) {
  const last = events.length ? events[events.length - 1].seq : 0;
  return (
    <ol class="timeline" data-testid="timeline" data-last-seq={last}>
      {events.map((e) => (
        <li key={e.seq} data-seq={e.seq} data-type={e.type}>
          <time dateTime={e.occurred_at}>{new Date(e.occurred_at).toLocaleString()}</time>{" "}
          <span class="actor">{who(e)}</span> <span class="etype">{e.type}</span>
          <div>{describe(e)}</div>
        </li>
      ))}
    </ol>
  );
}
