// Small pieces the pages share.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { ItemFlow } from "./api";
import { waits } from "./cards";

// Alert shows an error with the API's message (role="alert" for the tests and screen readers).
export function Alert({ error }: { error: string }) {
  if (!error) return null;
  return (
    <p role="alert" class="alert">
      {error}
    </p>
  );
}

const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

// ago is a time for people: "3 minutes ago", with the exact time as a tooltip.
export function Ago({ at }: { at: string | undefined | null }) {
  if (!at) return <span>—</span>;
  const t = new Date(at);
  const s = (t.getTime() - Date.now()) / 1000;
  const abs = Math.abs(s);
  let text: string;
  if (abs < 60) text = rtf.format(Math.round(s), "second");
  else if (abs < 3600) text = rtf.format(Math.round(s / 60), "minute");
  else if (abs < 86400) text = rtf.format(Math.round(s / 3600), "hour");
  else text = rtf.format(Math.round(s / 86400), "day");
  return (
    <time dateTime={at} title={t.toISOString()}>
      {text}
    </time>
  );
}

export function usd(n: number | null | undefined): string {
  if (n === null || n === undefined) return "no limit";
  return "$" + (n < 1 && n > 0 ? n.toFixed(4) : n.toFixed(2));
}

export function duration(from?: string, to?: string): string {
  if (!from) return "—";
  const ms = (to ? new Date(to).getTime() : Date.now()) - new Date(from).getTime();
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export const stateNames: Record<string, string> = {
  backlog: "Backlog",
  ready: "Ready",
  in_progress: "In progress",
  waiting_for_answer: "Waiting for answer",
  paused: "Paused",
  done: "Done",
  cancelled: "Cancelled",
};

export function Badge({ kind, children }: { kind: string; children: ComponentChildren }) {
  return <span class={`badge badge-${kind}`}>{children}</span>;
}

// FlowLine says where a ticket's flow is and what it waits for.
export function FlowLine({ flow }: { flow: ItemFlow | null | undefined }) {
  if (!flow) return null;
  return (
    <span class="flowline" data-testid="flow">
      <span>stage {flow.stage}</span>
      {" · "}
      <span>{flow.status}</span>
      {flow.waiting && <span> · {waits(flow)}</span>}
      {flow.attention && (
        <>
          {" "}
          <Badge kind="attention">{flow.attention === "no_runner" ? "no runner" : flow.attention}</Badge>
        </>
      )}
    </span>
  );
}

// The moves a person may make from each ticket state (docs/flows.md).
export const ticketMoves: Record<string, string[]> = {
  backlog: ["ready", "cancelled"],
  ready: ["backlog", "cancelled"],
  in_progress: ["paused", "cancelled"],
  waiting_for_answer: ["paused", "cancelled"],
  paused: ["ready", "backlog", "cancelled"],
  done: ["backlog"],
  cancelled: ["backlog"],
};
export const epicStates = ["backlog", "ready", "in_progress", "done", "cancelled"];

// projectTabs are a project's pages after its board, by their last segment.
export const projectTabs = ["pipelines", "settings", "members", "webhooks"] as const;
type ProjectTab = "board" | (typeof projectTabs)[number];

// ProjectNav links a project's pages.
export function ProjectNav({ project, current }: { project: string; current: ProjectTab }) {
  const base = `/projects/${encodeURIComponent(project)}`;
  const links: [ProjectTab, string, string][] = [
    ["board", base, "Board"],
    ["pipelines", base + "/pipelines", "Pipelines"],
    ["settings", base + "/settings", "Settings"],
    ["members", base + "/members", "Members"],
    ["webhooks", base + "/webhooks", "Webhooks"],
  ];
  return (
    <nav aria-label={`Project ${project}`} class="tabs">
      {links.map(([k, href, label]) => (
        <a key={k} href={href} aria-current={k === current ? "page" : undefined}>
          {label}
        </a>
      ))}
    </nav>
  );
}

// permissionsOrNone reads the caller's permissions; without an answer the
// page shows no controls (the API refuses them anyway).
export async function permissionsOrNone(read: () => Promise<Set<string>>): Promise<Set<string>> {
  try {
    return await read();
  } catch {
    return new Set();
  }
}

// Disclosure is a <details> whose content exists only while it is open: a
// closed one holds no controls that Tab would skip.
export function Disclosure({ summary, children }: { summary: string; children: ComponentChildren }) {
  const [open, setOpen] = useState(false);
  return (
    <details class="create" open={open} onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>{summary}</summary>
      {open && children}
    </details>
  );
}

export interface ConfirmOptions {
  title: string; // the question, as the dialog's heading
  body: string; // what will happen
  confirm: string; // the button that does it
  keep: string; // the button that leaves things as they are (Escape does too)
  danger?: boolean;
}

// useConfirm asks before an action that cannot be taken back: ask(opts)
// opens a modal dialog (a native <dialog>: focus moves into it and stays,
// Escape closes it, the page behind is inert) on the button that leaves
// things as they are, and resolves true only when the person confirms.
// Focus goes back to what had it. Render the element it returns.
export function useConfirm(): [(o: ConfirmOptions) => Promise<boolean>, ComponentChildren] {
  const [open, setOpen] = useState<{ o: ConfirmOptions; resolve: (ok: boolean) => void; back: HTMLElement | null } | null>(null);
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (open && d && !d.open) d.showModal();
  }, [open]);
  const close = (ok: boolean) => {
    if (!open) return;
    ref.current?.close();
    open.resolve(ok);
    open.back?.focus();
    setOpen(null);
  };
  const ask = (o: ConfirmOptions) =>
    new Promise<boolean>((resolve) => setOpen({ o, resolve, back: document.activeElement as HTMLElement | null }));
  const el = open && (
    <dialog
      ref={ref}
      class="confirm"
      aria-labelledby="confirm-title"
      aria-describedby="confirm-body"
      data-testid="confirm"
      onCancel={(e) => {
        e.preventDefault();
        close(false);
      }}
    >
      <h2 id="confirm-title">{open.o.title}</h2>
      <p id="confirm-body">{open.o.body}</p>
      <div class="actions">
        <button type="button" class="secondary" autofocus onClick={() => close(false)}>
          {open.o.keep}
        </button>
        <button type="button" class={open.o.danger ? "danger" : ""} onClick={() => close(true)}>
          {open.o.confirm}
        </button>
      </div>
    </dialog>
  );
  return [ask, el];
}
