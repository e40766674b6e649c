// The signed-in person's notifications (docs/notifications.md): the inbox
// API, the unread count the navigation shows on every page, and the live
// "notifications" stream (docs/events.md) that keeps both current — a new
// notification, or one read in another tab, updates them without a reload.
import { useEffect, useState } from "preact/hooks";
import { enc, get, post, type BalletEvent } from "./api";
import { subscribe } from "./realtime";

export interface Notification {
  id: string;
  cause: string;
  item: string;
  title: string;
  text: string;
  link: string;
  event_seq: number;
  created_at: string;
  read_at: string | null;
}

export interface InboxPage {
  notifications: Notification[];
  unread: number;
  next_before: number | null;
}

// causes says each cause in words, as a person reads it.
export const causes: Record<string, string> = {
  "question.opened": "Question waiting",
  "approval.waiting": "Approval waiting",
  "merge.waiting": "Merge waiting",
  "flow.stuck": "Flow stuck",
  "flow.failed": "Flow failed",
  "budget.exhausted": "Budget used up",
  "runner.missing": "No runner",
  "ticket.done": "Ticket done",
  "question.escalated": "Still waiting",
  "webhook.disabled": "Webhook disabled",
};

// causeKind is the badge colour of a cause: what asks something of the
// person, what went wrong, what is news.
export function causeKind(cause: string): string {
  switch (cause) {
    case "question.opened":
    case "approval.waiting":
    case "merge.waiting":
      return "question";
    case "flow.stuck":
    case "flow.failed":
    case "runner.missing":
    case "question.escalated":
    case "webhook.disabled":
      return "attention";
    case "budget.exhausted":
      return "budget";
    default:
      return "done";
  }
}

export const inbox = {
  list: (f: { unread?: boolean; before?: number | null; limit?: number }) => {
    const q = new URLSearchParams();
    if (f.unread) q.set("unread", "true");
    if (f.before) q.set("before", String(f.before));
    if (f.limit) q.set("limit", String(f.limit));
    const s = q.toString();
    return get<InboxPage>("/api/v1/me/notifications/inbox" + (s ? "?" + s : ""));
  },
  read: (id: string) => post<Notification>(`/api/v1/me/notifications/inbox/${enc(id)}/read`),
  readAll: () => post<{ read: number }>("/api/v1/me/notifications/inbox/read"),
};

// The unread count, shared by every component that shows it.
let unread: number | undefined;
const listeners = new Set<() => void>();
const eventListeners = new Set<(e: BalletEvent) => void>();

function setUnread(n: number) {
  if (n === unread) return;
  unread = n;
  listeners.forEach((l) => l());
}

let asking: Promise<void> | null = null;
let again = false;

// refreshUnread reads the count again (one request at a time; a call while
// one runs asks once more after it, so the last change is never missed).
export function refreshUnread(): Promise<void> {
  if (asking) {
    again = true;
    return asking;
  }
  asking = inbox
    .list({ unread: true, limit: 1 })
    .then((p) => setUnread(p.unread))
    .catch(() => {}) // the badge keeps its last count; the page shows errors
    .finally(() => {
      asking = null;
      if (again) {
        again = false;
        void refreshUnread();
      }
    });
  return asking;
}

// adjustUnread changes the count at once after the person's own action (a
// read), before the stream's event confirms it.
export function adjustUnread(delta: number) {
  if (unread !== undefined) setUnread(Math.max(0, unread + delta));
}

// useUnread is the unread count (undefined until first read).
export function useUnread(): number | undefined {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((t) => t + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return unread;
}

// onInboxEvent calls fn with each of the person's notification events
// while the shell follows the stream; it returns the function that stops.
export function onInboxEvent(fn: (e: BalletEvent) => void): () => void {
  eventListeners.add(fn);
  return () => void eventListeners.delete(fn);
}

let timer: number | undefined;

// followInbox follows the signed-in person's notifications stream: each
// event reads the count again (a burst once) and reaches the listeners.
// It returns the function that stops following.
export function followInbox(): () => void {
  void refreshUnread();
  const stop = subscribe(
    "notifications",
    undefined,
    (e) => {
      clearTimeout(timer);
      timer = window.setTimeout(() => void refreshUnread(), 100);
      eventListeners.forEach((l) => l(e));
    },
    () => {
      // Refused or ended for good: the count is read again every minute.
      const t = window.setInterval(() => void refreshUnread(), 60000);
      stopPoll = () => clearInterval(t);
    },
  );
  let stopPoll = () => {};
  return () => {
    stop();
    stopPoll();
    unread = undefined;
  };
}
