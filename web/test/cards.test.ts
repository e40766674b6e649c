// What a board card marks (src/cards.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { cost, needsYou, waits } from "../src/cards";

const flow = (status: string, waiting: string, attention = "") => ({ stage: "s", status, waiting, attention });

test("a ticket needs you when its flow waits for a person", () => {
  assert.equal(needsYou(null), "");
  assert.equal(needsYou(undefined), "");
  assert.equal(needsYou(flow("waiting", "approval")), "approve");
  assert.equal(needsYou(flow("waiting", "answer")), "answer");
  assert.equal(needsYou(flow("waiting", "review")), "review");
  assert.equal(needsYou(flow("waiting", "merge")), "merge");
  assert.equal(needsYou(flow("waiting", "budget")), "");
  assert.equal(needsYou(flow("waiting", "pause")), "");
  assert.equal(needsYou(flow("running", "run")), "");
  assert.equal(needsYou(flow("running", "checks")), "");
  assert.equal(needsYou(flow("running", "run", "no_runner")), "");
  assert.equal(needsYou(flow("waiting", "answer", "stuck")), "answer");
  assert.equal(needsYou(flow("done", "")), "");
});

test("costs so far read as dollars and cents", () => {
  assert.equal(cost(0), "$0.00");
  assert.equal(cost(0.004), "< $0.01");
  assert.equal(cost(0.02001), "$0.02");
  assert.equal(cost(12.5), "$12.50");
});

test("a flow's wait reads as what it waits for; a provider limit with its end", () => {
  const utc = (d: Date) => d.toISOString().slice(11, 16);
  assert.equal(waits({ waiting: "" }), "");
  assert.equal(waits({ waiting: "budget" }), "waits for budget");
  assert.equal(waits({ waiting: "pause" }), "waits for pause");
  assert.equal(waits({ waiting: "provider", until: "2026-12-07T14:05:30Z" }, utc), "waiting for the provider until 14:05");
  assert.equal(waits({ waiting: "provider" }), "waiting for the provider");
  assert.equal(needsYou({ stage: "s", status: "waiting", waiting: "provider", attention: "" }), "");
});
