// Notifications: the signed-in person's inbox, newest first, live. Each
// says what happened in words, on which ticket, and links straight to where
// the person acts (following the link marks it read); one or all are
// marked read here. ?filter=unread shows only the unread ones.
import { useEffect, useRef, useState } from "preact/hooks";
import { adjustUnread, causeKind, causes, inbox, onInboxEvent, refreshUnread, type InboxPage, type Notification } from "../inbox";
import { message, useAction, useDebounced, useLoad } from "../load";
import { navigate, useLocation } from "../router";
import { Ago, Alert, Badge } from "../ui";

const pageSize = 50;

export default function Page() {
  const loc = useLocation();
  const unreadOnly = loc.searchParams.get("filter") === "unread";
  // How many the page shows: the first page, and the older pages loaded
  // since (a live reload reads them all again, up to the API's 200).
  const [shown, setShown] = useState(pageSize);
  const shownRef = useRef(shown);
  shownRef.current = shown;
  const list = useLoad(() => inbox.list({ unread: unreadOnly, limit: Math.min(200, shownRef.current) }), [unreadOnly]);
  const [older, setOlder] = useState<Notification[]>([]);
  const [next, setNext] = useState<number | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [olderError, setOlderError] = useState("");
  const [run, busy, error] = useAction();
  const later = useDebounced(() => void list.reload(), 150);

  useEffect(() => onInboxEvent(later), [later]);
  // "2 minutes ago" moves on while the page stays open.
  const [, tick] = useState(0);
  useEffect(() => {
    const t = window.setInterval(() => tick((n) => n + 1), 30000);
    return () => clearInterval(t);
  }, []);
  useEffect(() => {
    setOlder([]);
    setShown(pageSize);
  }, [unreadOnly]);
  useEffect(() => {
    if (list.data) setNext(list.data.next_before);
  }, [list.data]);

  const items = list.data ? dedupe(list.data.notifications.concat(older)) : [];
  const unread = list.data?.unread ?? 0;

  const loadOlder = async () => {
    if (!next) return;
    setLoadingOlder(true);
    setOlderError("");
    try {
      const p: InboxPage = await inbox.list({ unread: unreadOnly, before: next, limit: pageSize });
      setOlder((o) => o.concat(p.notifications));
      setShown((s) => s + pageSize);
      setNext(p.next_before);
    } catch (e) {
      setOlderError(message(e));
    } finally {
      setLoadingOlder(false);
    }
  };

  // markRead marks one read where it stands (the list keeps it, so nothing
  // moves under the pointer), then moves focus to its link.
  const markRead = (n: Notification) =>
    run(async () => {
      const read = await inbox.read(n.id);
      replace(read);
      adjustUnread(-1);
      void refreshUnread();
      document.querySelector<HTMLElement>(`[data-id="${CSS.escape(n.id)}"] a.target`)?.focus();
    });
  const replace = (x: Notification) => {
    if (list.data) list.setData({ ...list.data, notifications: list.data.notifications.map((n) => (n.id === x.id ? x : n)), unread: Math.max(0, unread - 1) });
    setOlder((o) => o.map((n) => (n.id === x.id ? x : n)));
  };
  const readAll = () =>
    run(async () => {
      // One call marks at most 500: the rest with the next.
      while ((await inbox.readAll()).read >= 500);
      await Promise.all([list.reload(), refreshUnread()]);
      setOlder((o) => o.map((n) => (n.read_at ? n : { ...n, read_at: new Date().toISOString() })));
    });
  // Following the link marks the notification read, in the background.
  const follow = (n: Notification) => {
    if (n.read_at) return;
    adjustUnread(-1);
    inbox.read(n.id).then(
      () => void refreshUnread(),
      () => void refreshUnread(),
    );
  };
  const setFilter = (f: "all" | "unread") => navigate(f === "unread" ? "/notifications?filter=unread" : "/notifications");

  return (
    <section class="inbox">
      <div class="inbox-head">
        <h1>Notifications</h1>
        <div class="row">
          <div role="group" aria-label="Show" class="segmented">
            <button type="button" aria-pressed={!unreadOnly} onClick={() => setFilter("all")}>
              All
            </button>
            <button type="button" aria-pressed={unreadOnly} onClick={() => setFilter("unread")}>
              Unread
            </button>
          </div>
          <button type="button" class="secondary" disabled={busy || !unread} onClick={readAll}>
            Mark all read
          </button>
        </div>
      </div>
      <p class="muted">
        <span aria-live="polite" data-testid="inbox-summary">
          {list.data ? (unread ? `${unread} unread` : "Nothing unread") : "\u00a0"}
        </span>
        {items.length > 1 && <span> · ↑ ↓ (or j k) move between notifications</span>}
      </p>
      <Alert error={list.error || error} />
      {list.data && !items.length && (
        <div class="empty" data-testid="inbox-empty">
          {unreadOnly ? (
            <>
              <p>You are all caught up: nothing unread.</p>
              <p>
                <a href="/notifications">Show all notifications</a>
              </p>
            </>
          ) : (
            <>
              <p>No notifications yet.</p>
              <p class="muted">
                When a ticket needs you — a blocking question, an approval, a merge left to a person — or a flow of yours fails, it appears here.
              </p>
            </>
          )}
        </div>
      )}
      <ol class="notifications" data-testid="notifications" aria-label="Notifications, newest first" onKeyDown={moveFocus}>
        {items.map((n) => (
          <Entry key={n.id} n={n} busy={busy} onRead={() => markRead(n)} onFollow={() => follow(n)} />
        ))}
      </ol>
      {next !== null && items.length > 0 && (
        <p>
          <button type="button" class="secondary" disabled={loadingOlder} onClick={loadOlder}>
            Show older
          </button>
        </p>
      )}
      <Alert error={olderError} />
    </section>
  );
}

// moveFocus: within the list, the arrow keys (and j / k) move between
// the notifications' links, as in a mail inbox; Tab still visits every
// control in order.
function moveFocus(e: KeyboardEvent) {
  const step = e.key === "ArrowDown" || e.key === "j" ? 1 : e.key === "ArrowUp" || e.key === "k" ? -1 : 0;
  if (!step || e.altKey || e.ctrlKey || e.metaKey) return;
  const links = [...(e.currentTarget as HTMLElement).querySelectorAll<HTMLElement>("a.target")];
  const here = links.findIndex((a) => a.closest("li")?.contains(e.target as Node));
  const to = links[here + step];
  if (here < 0 || !to) return;
  e.preventDefault();
  to.focus();
}

function dedupe(ns: Notification[]): Notification[] {
  const seen = new Set<string>();
  return ns.filter((n) => !seen.has(n.id) && (seen.add(n.id), true));
}

function Entry({ n, busy, onRead, onFollow }: { n: Notification; busy: boolean; onRead: () => void; onFollow: () => void }) {
  const unread = n.read_at === null;
  return (
    <li class={"card notification" + (unread ? " unread" : "")} data-testid="notification" data-id={n.id} data-unread={unread ? "1" : "0"} data-cause={n.cause}>
      <span class="dot" aria-hidden="true" />
      <div class="body">
        <div class="row">
          <Badge kind={causeKind(n.cause)}>{causes[n.cause] ?? n.cause}</Badge>
          <a class="target" href={n.link} onClick={onFollow} onAuxClick={onFollow}>
            {unread && <span class="sr">Unread: </span>}
            <span class="key">{n.item}</span> {n.title}
          </a>
          <span class="muted when">
            <Ago at={n.created_at} />
          </span>
        </div>
        <p class="line">{n.text}</p>
      </div>
      <div class="mark">
        {unread && (
          <button type="button" class="secondary" disabled={busy} onClick={onRead} aria-label={`Mark read: ${n.item}, ${causes[n.cause] ?? n.cause}`}>
            Mark read
          </button>
        )}
      </div>
    </li>
  );
}
