// The line diff of two pipeline versions (src/pipelines/linediff.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { rows } from "../src/pipelines/linediff";

test("changed lines with their numbers on both sides", () => {
  const got = rows("a\nb\nc\n", "a\nB\nc\nd\n");
  assert.deepEqual(got, [
    { kind: "same", text: "a", old: 1, new: 1 },
    { kind: "del", text: "b", old: 2 },
    { kind: "add", text: "B", new: 2 },
    { kind: "same", text: "c", old: 3, new: 3 },
    { kind: "add", text: "d", new: 4 },
  ]);
});

test("equal texts have no change; empty ones no line", () => {
  assert.ok(rows("x\ny\n", "x\ny\n").every((r) => r.kind !== "add" && r.kind !== "del"));
  assert.deepEqual(rows("", ""), []);
  assert.deepEqual(rows("", "a\n"), [{ kind: "add", text: "a", new: 1 }]);
});

test("long unchanged stretches fold to the context around a change", () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`);
  const after = [...before];
  after[9] = "changed";
  const got = rows(before.join("\n") + "\n", after.join("\n") + "\n", 2);
  const kinds = got.map((r) => r.kind);
  assert.deepEqual(kinds, ["fold", "same", "same", "del", "add", "same", "same", "fold"]);
  assert.equal(got[0].folded, 7); // lines 1–7
  assert.equal(got[1].old, 8);
  assert.equal(got[7].folded, 8); // lines 13–20
  // A stretch no longer than both contexts and the fold line stays.
  const short = rows("a\nb\nc\nd\ne\n", "A\nb\nc\nd\nE\n", 2);
  assert.ok(!short.some((r) => r.kind === "fold"));
});
