// What a board card marks (src/cards.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { cost, needsYou } from "../src/cards";

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
