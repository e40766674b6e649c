// What a board card says of a ticket's flow beyond its stage: whether a
// person must act (the "needs you" mark) and what its runs cost so far.
import type { ItemFlow } from "./api";

// needsYou says what a person must do for a ticket's flow ("approve",
// "answer", "review", "merge"), or "": a waiting flow that waits for a
// person, or a stuck one (its question needs an answer).
export function needsYou(flow: ItemFlow | null | undefined): string {
  if (!flow) return "";
  if (flow.attention === "stuck") return "answer";
  if (flow.status !== "waiting") return "";
  return { approval: "approve", answer: "answer", review: "review", merge: "merge" }[flow.waiting] ?? "";
}

// hhmm is a time of day as the UI shows a wait's end: "14:05", local.
const hhmm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

// waits says what a flow waits for, as its status line shows it: "waits for
// budget", or, while a provider limit holds it, "waiting for the provider
// until 14:05" (at, a time formatter: local hours and minutes by default);
// "" when it waits for nothing.
export function waits(flow: { waiting?: string; until?: string }, at: (d: Date) => string = (d) => hhmm.format(d)): string {
  if (!flow.waiting) return "";
  if (flow.waiting === "provider") {
    return flow.until ? `waiting for the provider until ${at(new Date(flow.until))}` : "waiting for the provider";
  }
  return `waits for ${flow.waiting}`;
}

// cost is a cost so far for a card: cents, or "< $0.01".
export function cost(usd: number): string {
  if (usd > 0 && usd < 0.01) return "< $0.01";
  return "$" + usd.toFixed(2);
}

