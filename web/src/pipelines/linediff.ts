// A line diff of two texts for people: each line added, removed or kept,
// with its line numbers on both sides, and long unchanged stretches folded
// to a few lines of context around each change (jsdiff finds the changes).
import { diffLines } from "diff";

const CONTEXT = 3; // unchanged lines shown around a change

export interface Row {
  kind: "add" | "del" | "same" | "fold";
  text: string;
  old?: number; // line number in the older version
  new?: number; // line number in the newer one
  folded?: number; // for "fold": how many unchanged lines it hides
}

// rows diffs two texts into lines, folding unchanged runs longer than
// twice the context.
export function rows(before: string, after: string, context = CONTEXT): Row[] {
  const all: Row[] = [];
  let o = 1, n = 1;
  for (const part of diffLines(before, after)) {
    if (!part.value) continue;
    const lines = part.value.replace(/\n$/, "").split("\n");
    for (const text of lines) {
      if (part.added) all.push({ kind: "add", text, new: n++ });
      else if (part.removed) all.push({ kind: "del", text, old: o++ });
      else all.push({ kind: "same", text, old: o++, new: n++ });
    }
  }
  const out: Row[] = [];
  for (let i = 0; i < all.length; ) {
    if (all[i].kind !== "same") {
      out.push(all[i++]);
      continue;
    }
    let j = i;
    while (j < all.length && all[j].kind === "same") j++;
    const head = i === 0 ? 0 : context; // context after a change
    const tail = j === all.length ? 0 : context; // context before the next
    if (j - i > head + tail + 1) {
      out.push(...all.slice(i, i + head));
      out.push({ kind: "fold", text: "", folded: j - i - head - tail });
      out.push(...all.slice(j - tail, j));
    } else out.push(...all.slice(i, j));
    i = j;
  }
  return out;
}

