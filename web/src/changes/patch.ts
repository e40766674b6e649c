// Reading a file's unified patch (the hunks from the first "@@", as
// GET /items/{item}/changes gives them) into rows to show, unified or side
// by side. Pure.

// Row is one line of a unified diff: kind "hunk" is a hunk's header.
export interface Row {
  kind: "hunk" | "context" | "add" | "del" | "note";
  old?: number; // line number on the base side
  new?: number; // line number on the branch side
  text: string;
}

const hunkRE = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

// parse reads a patch into rows; a line outside a hunk is kept as a note.
export function parse(patch: string): Row[] {
  const rows: Row[] = [];
  let o = 0;
  let n = 0;
  const lines = patch.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) {
    const h = hunkRE.exec(line);
    if (h) {
      o = Number(h[1]);
      n = Number(h[2]);
      rows.push({ kind: "hunk", text: line });
      continue;
    }
    switch (line[0]) {
      case " ":
        rows.push({ kind: "context", old: o++, new: n++, text: line.slice(1) });
        break;
      case "+":
        rows.push({ kind: "add", new: n++, text: line.slice(1) });
        break;
      case "-":
        rows.push({ kind: "del", old: o++, text: line.slice(1) });
        break;
      case "\\": // "\ No newline at end of file"
        rows.push({ kind: "note", text: line.slice(2) });
        break;
      default:
        // An empty context line some tools write without its space.
        if (line === "" && rows.length) rows.push({ kind: "context", old: o++, new: n++, text: "" });
        else rows.push({ kind: "note", text: line });
    }
  }
  return rows;
}

// Pair is one line of the side-by-side view: the base's line on the left,
// the branch's on the right (either missing where the other side added or
// removed more).
export interface Pair<R extends Row = Row> {
  left?: R;
  right?: R;
  full?: R; // a hunk header or a note, across both sides
}

// split pairs a run of removed lines with the added lines that follow it,
// line by line, as side-by-side views do.
export function split<R extends Row>(rows: R[]): Pair<R>[] {
  const out: Pair<R>[] = [];
  let dels: R[] = [];
  let adds: R[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) out.push({ left: dels[i], right: adds[i] });
    dels = [];
    adds = [];
  };
  for (const r of rows) {
    if (r.kind === "del") {
      if (adds.length) flush();
      dels.push(r);
    } else if (r.kind === "add") adds.push(r);
    else {
      flush();
      if (r.kind === "context") out.push({ left: r, right: r });
      else out.push({ full: r });
    }
  }
  flush();
  return out;
}
