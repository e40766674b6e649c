// The keyboard shortcuts' logic (src/keys.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { boardOf, Keymap, move, SEQUENCE_MS, typing } from "../src/keys";

test("single keys are commands; modifiers and other keys are not", () => {
  const k = new Keymap();
  assert.equal(k.press({ key: "j" }, 0), "next");
  assert.equal(k.press({ key: "k" }, 0), "prev");
  assert.equal(k.press({ key: "Enter" }, 0), "open");
  assert.equal(k.press({ key: "/" }, 0), "search");
  assert.equal(k.press({ key: "?" }, 0), "help");
  assert.equal(k.press({ key: "x" }, 0), null);
  assert.equal(k.press({ key: "j", ctrlKey: true }, 0), null);
  assert.equal(k.press({ key: "k", metaKey: true }, 0), null);
  assert.equal(k.press({ key: "/", altKey: true }, 0), null);
});

test("g then b or n goes somewhere, within the sequence's time", () => {
  const k = new Keymap();
  assert.equal(k.press({ key: "g" }, 1000), null);
  assert.equal(k.press({ key: "b" }, 1000 + SEQUENCE_MS), "board");
  assert.equal(k.press({ key: "g" }, 5000), null);
  assert.equal(k.press({ key: "n" }, 5100), "needs-me");
  // Too late: "n" alone is nothing, and the "g" is forgotten.
  assert.equal(k.press({ key: "g" }, 9000), null);
  assert.equal(k.press({ key: "n" }, 9001 + SEQUENCE_MS), null);
  assert.equal(k.press({ key: "b" }, 9002 + SEQUENCE_MS), null);
  // "g" then another key ends the sequence: that key does not count either.
  assert.equal(k.press({ key: "g" }, 20000), null);
  assert.equal(k.press({ key: "j" }, 20001), null);
  assert.equal(k.press({ key: "j" }, 20002), "next");
  // A modifier in between cancels it.
  assert.equal(k.press({ key: "g" }, 30000), null);
  assert.equal(k.press({ key: "b", ctrlKey: true }, 30001), null);
  assert.equal(k.press({ key: "b" }, 30002), null);
  // "b" and "n" alone are nothing.
  assert.equal(k.press({ key: "b" }, 40000), null);
  assert.equal(k.press({ key: "n" }, 40001), null);
});

test("typing in a field is never a shortcut", () => {
  const none = () => null;
  assert.equal(typing(null), false);
  assert.equal(typing({ tagName: "BODY", closest: none }), false);
  assert.equal(typing({ tagName: "A", closest: none }), false);
  assert.equal(typing({ tagName: "BUTTON", closest: none }), false);
  assert.equal(typing({ tagName: "TEXTAREA" }), true);
  assert.equal(typing({ tagName: "SELECT" }), true);
  assert.equal(typing({ tagName: "INPUT" }), true); // type defaults to text
  assert.equal(typing({ tagName: "INPUT", type: "search" }), true);
  assert.equal(typing({ tagName: "INPUT", type: "checkbox" }), false);
  assert.equal(typing({ tagName: "DIV", isContentEditable: true }), true);
  // CodeMirror's content is a contenteditable inside .cm-editor.
  const inEditor = (sel: string) => (sel.includes(".cm-editor") ? {} : null);
  assert.equal(typing({ tagName: "SPAN", closest: inEditor }), true);
});

test("the selection moves within the list and stops at its ends", () => {
  assert.equal(move(-1, 0, "next"), -1);
  assert.equal(move(-1, 3, "next"), 0);
  assert.equal(move(-1, 3, "prev"), 2);
  assert.equal(move(0, 3, "next"), 1);
  assert.equal(move(2, 3, "next"), 2);
  assert.equal(move(0, 3, "prev"), 0);
  assert.equal(move(7, 3, "next"), 0); // a selection the list lost
});

test("g b opens the board of the page's project, else the last one", () => {
  assert.equal(boardOf("/projects/ACME", ""), "ACME");
  assert.equal(boardOf("/projects/ACME/pipelines", "OLD"), "ACME");
  assert.equal(boardOf("/items/ACME-12", ""), "ACME");
  assert.equal(boardOf("/items/MY-APP-7", ""), "MY-APP");
  assert.equal(boardOf("/needs-me", "OLD"), "OLD");
  assert.equal(boardOf("/needs-me", ""), "");
  assert.equal(boardOf("/projects/%E0%A4%A", "OLD"), ""); // a malformed escape
});
