// Live events (docs/events.md "Following events live"): one WebSocket per tab
// speaking JSON-RPC 2.0, one subscription per stream a page follows. After a
// dropped connection (or a lagged or ended subscription) every subscription
// is made again with after_seq = the last seq it delivered, so a page sees
// every event once, in order, without gap.
import { get, type BalletEvent } from "./api";

type Handler = (e: BalletEvent) => void;

interface Sub {
  stream: string;
  last: number | null; // the last seq delivered (or the live start), null before the first answer
  onEvent: Handler;
  onError?: (message: string) => void;
  server?: string; // the server's subscription id on the current socket
  pending?: number; // the id of the subscribe request in flight
}

const subs = new Set<Sub>();
const byServer = new Map<string, Sub>();
const calls = new Map<number, Sub>();
let ws: WebSocket | null = null;
let open = false;
let nextID = 1;
let failures = 0;
let retry: number | undefined;
let idle: number | undefined;

// subscribe follows stream ("project:ACME", "item:ACME-1", "org:acme") from
// after afterSeq (or from now when it is undefined) and returns the function
// that stops following it.
export function subscribe(stream: string, afterSeq: number | undefined, onEvent: Handler, onError?: (message: string) => void): () => void {
  const sub: Sub = { stream, last: afterSeq ?? null, onEvent, onError };
  subs.add(sub);
  clearTimeout(idle);
  if (!ws) connect();
  else if (open) send(sub);
  return () => {
    if (!subs.delete(sub)) return;
    if (sub.server) {
      byServer.delete(sub.server);
      if (open) ws!.send(JSON.stringify({ jsonrpc: "2.0", id: nextID++, method: "unsubscribe", params: { subscription: sub.server } }));
    }
    // Pages come and go on navigation: keep the socket a moment for the next one.
    if (!subs.size) idle = window.setTimeout(() => subs.size || close(), 5000);
  };
}

function url(): string {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/realtime";
}

function connect() {
  const sock = new WebSocket(url());
  ws = sock;
  open = false;
  sock.onopen = () => {
    if (ws !== sock) return;
    open = true;
    failures = 0;
    subs.forEach(send);
  };
  sock.onmessage = (m) => {
    if (ws === sock && typeof m.data === "string") receive(m.data);
  };
  sock.onclose = () => {
    if (ws !== sock) return;
    ws = null;
    open = false;
    byServer.clear();
    calls.clear();
    subs.forEach((s) => {
      s.server = undefined;
      s.pending = undefined;
    });
    if (!subs.size) return;
    failures++;
    // A refused handshake looks like any drop: a signed-out tab goes to sign in.
    if (failures >= 2) get("/api/v1/session").catch(() => {});
    const delay = Math.min(15000, 500 * 2 ** Math.min(failures - 1, 5)) * (0.75 + Math.random() / 2);
    retry = window.setTimeout(() => {
      retry = undefined;
      if (!ws && subs.size) connect();
    }, delay);
  };
}

function close() {
  clearTimeout(retry);
  const sock = ws;
  ws = null;
  open = false;
  byServer.clear();
  calls.clear();
  sock?.close();
}

function send(sub: Sub) {
  const id = nextID++;
  sub.pending = id;
  calls.set(id, sub);
  const params: Record<string, unknown> = { stream: sub.stream };
  if (sub.last !== null) params.after_seq = sub.last;
  ws!.send(JSON.stringify({ jsonrpc: "2.0", id, method: "subscribe", params }));
}

function receive(text: string) {
  let m: any;
  try {
    m = JSON.parse(text);
  } catch {
    return;
  }
  if (m.id !== undefined && m.id !== null) {
    const sub = calls.get(m.id);
    if (!sub) return;
    calls.delete(m.id);
    sub.pending = undefined;
    if (!subs.has(sub)) {
      // Stopped while the answer was on its way.
      if (m.result?.subscription && open) ws!.send(JSON.stringify({ jsonrpc: "2.0", id: nextID++, method: "unsubscribe", params: { subscription: m.result.subscription } }));
      return;
    }
    if (m.error) {
      subs.delete(sub);
      sub.onError?.(m.error.message ?? "the live stream was refused");
      return;
    }
    sub.server = m.result.subscription;
    byServer.set(sub.server!, sub);
    if (sub.last === null) sub.last = m.result.position;
    return;
  }
  const sub = m.params?.subscription ? byServer.get(m.params.subscription) : undefined;
  if (!sub) return;
  switch (m.method) {
    case "event": {
      const e = m.params.event as BalletEvent;
      if (sub.last !== null && e.seq <= sub.last) return;
      sub.last = e.seq;
      sub.onEvent(e);
      break;
    }
    case "lagged":
    case "ended":
      // Everything up to last_seq arrived: follow on from there.
      byServer.delete(m.params.subscription);
      sub.server = undefined;
      if (typeof m.params.last_seq === "number" && (sub.last === null || m.params.last_seq > sub.last)) sub.last = m.params.last_seq;
      if (open) send(sub);
      break;
  }
}
