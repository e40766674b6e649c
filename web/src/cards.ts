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

// cost is a cost so far for a card: cents, or "< $0.01".
export function cost(usd: number): string {
  if (usd > 0 && usd < 0.01) return "< $0.01";
  return "$" + usd.toFixed(2);
}

