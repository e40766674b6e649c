// Keyboard shortcuts, as pure logic the shell (shortcuts.tsx) drives and
// the unit tests check: which key presses are shortcuts at all (never
// while someone types), the two-key "g" sequences, where "g b" leads, and
// moving a selection through a list.

// A Command is what a shortcut does.
export type Command = "next" | "prev" | "open" | "search" | "board" | "needs-me" | "help";

// The shortcuts, for the help dialog: keys as pressed, then what they do.
export const shortcuts: [string[], string][] = [
  [["j"], "Select the next ticket or entry in a list"],
  [["k"], "Select the previous one"],
  [["Enter"], "Open the selected one"],
  [["/"], "Search or filter (where the page has a search box)"],
  [["g", "b"], "Go to the board"],
  [["g", "n"], "Go to Needs me"],
  [["?"], "Show these shortcuts"],
];

// SEQUENCE_MS is how long "g" waits for its second key.
export const SEQUENCE_MS = 1500;

// Press is the part of a keyboard event the logic reads.
export interface Press {
  key: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  altKey?: boolean;
}

// Keymap turns presses into commands, remembering a pending "g".
export class Keymap {
  private pending = 0; // when "g" was pressed (0: none)

  // press returns the command a press completes, or null. now is a time
  // in milliseconds (the event's timeStamp).
  press(p: Press, now: number): Command | null {
    if (p.ctrlKey || p.metaKey || p.altKey) {
      this.pending = 0;
      return null;
    }
    const g = this.pending && now - this.pending <= SEQUENCE_MS;
    this.pending = 0;
    if (g) {
      if (p.key === "b") return "board";
      if (p.key === "n") return "needs-me";
      return null; // "g" then anything else: nothing
    }
    switch (p.key) {
      case "g":
        this.pending = now;
        return null;
      case "j":
        return "next";
      case "k":
        return "prev";
      case "Enter":
        return "open";
      case "/":
        return "search";
      case "?":
        return "help";
    }
    return null;
  }
}

// Typed is what typing happens in: text fields, selects, editors.
export interface Typed {
  tagName: string;
  type?: string;
  isContentEditable?: boolean;
  closest?: (selector: string) => unknown;
}

const notText = new Set(["checkbox", "radio", "button", "submit", "reset", "file", "range", "color", "image"]);

// typing says whether keys pressed in el are someone typing (or choosing)
// rather than shortcuts.
export function typing(el: Typed | null): boolean {
  if (!el) return false;
  const tag = el.tagName.toUpperCase();
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") return !notText.has((el.type ?? "text").toLowerCase());
  if (el.isContentEditable) return true;
  return !!el.closest?.(".cm-editor, [contenteditable='true'], [role='textbox']");
}

// move is the index selected after a "next" or "prev" in a list of n
// entries, from current (-1: none). It stops at the ends.
export function move(current: number, n: number, cmd: "next" | "prev"): number {
  if (n === 0) return -1;
  if (current < 0 || current >= n) return cmd === "next" ? 0 : n - 1;
  return cmd === "next" ? Math.min(current + 1, n - 1) : Math.max(current - 1, 0);
}

// boardOf is the project whose board "g b" opens from path: the project of
// the page (a project's pages, a ticket by its key "ACME-12"), else the
// last one visited; "" when there is none.
export function boardOf(path: string, last: string): string {
  const p = /^\/projects\/([^/]+)/.exec(path);
  if (p) return safeDecode(p[1]);
  const t = /^\/items\/(.+)-\d+$/.exec(path);
  if (t) return safeDecode(t[1]);
  return last;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return "";
  }
}
