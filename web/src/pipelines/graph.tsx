// The graph of a pipeline: its stages in order, then $done, $failed and
// $question, and an edge per outcome to where it leads (done above the
// row, failed and blocked below; dashed when it is the default). It is
// drawn at its natural size (text as large as the page's) and scrolls
// sideways when it is wider than the page; current lights a stage. Its
// colours are the page's tokens (pipelines.css), in light and dark.
import { type Definition, type Outcome, OUTCOMES, SPECIAL_TARGETS, target } from "./model";

const W = 150, H = 48, GAP = 44, PAD = 10;

interface Edge {
  from: number;
  to: number;
  outcomes: Outcome[];
  written: boolean;
}

export function Graph({ def, current }: { def: Definition; current?: string }) {
  const ids = def.stages.map((s) => s.id);
  const nodes = [...ids, ...SPECIAL_TARGETS];
  const index = (t: string) => {
    const i = ids.indexOf(t);
    return i >= 0 ? i : nodes.indexOf(t, ids.length); // -1: an unknown target
  };
  const edges: Edge[] = [];
  def.stages.forEach((s, i) => {
    for (const o of OUTCOMES) {
      const to = index(target(def, i, o));
      if (to < 0) continue;
      const written = !!s.next?.[o];
      const up = o === "done";
      const same = edges.find((e) => e.from === i && e.to === to && e.written === written && (e.outcomes[0] === "done") === up);
      if (same) same.outcomes.push(o);
      else edges.push({ from: i, to, outcomes: [o], written });
    }
  });
  const x = (n: number) => PAD + n * (W + GAP);
  const mid = (n: number) => x(n) + W / 2;
  const lift = (e: Edge) => (e.from === e.to ? 32 : 22 + 16 * Math.min(Math.abs(e.to - e.from), 8));
  const upMax = Math.max(0, ...edges.filter((e) => e.outcomes[0] === "done" && !(e.to === e.from + 1)).map(lift));
  const downMax = Math.max(0, ...edges.filter((e) => e.outcomes[0] !== "done").map(lift));
  const top = PAD + upMax + 16;
  const width = x(nodes.length) - GAP + PAD;
  const height = top + H + downMax + 26;
  // Each curved edge ends at a port of its own along the node's top (done)
  // or bottom (failed, blocked), ordered by where the other end is, so that
  // edges into one node do not pile up.
  const port = new Map<string, number>();
  const ends = new Map<string, { key: string; other: number }[]>();
  edges.forEach((e, k) => {
    if (e.outcomes[0] === "done" && e.to === e.from + 1) return; // a straight arrow
    const side = e.outcomes[0] === "done" ? "up" : "down";
    const at = (n: number, key: string, other: number) => {
      const list = ends.get(`${side}${n}`) ?? [];
      list.push({ key, other });
      ends.set(`${side}${n}`, list);
    };
    at(e.from, `${k}from`, e.from === e.to ? mid(e.from) - 1 : mid(e.to));
    at(e.to, `${k}to`, e.from === e.to ? mid(e.to) + 1 : mid(e.from));
  });
  for (const [key, list] of ends) {
    const n = Number(key.replace(/^\D+/, ""));
    list.sort((a, b) => a.other - b.other);
    list.forEach((end, j) => port.set(end.key, x(n) + (W * (j + 1)) / (list.length + 1)));
  }
  const name = (n: number) => (n < ids.length ? ids[n] || `stage ${n + 1}` : nodes[n]);

  return (
    <figure class="pipeline-graph" tabIndex={0} aria-label="Pipeline graph (scrolls sideways)">
      <svg role="img" aria-labelledby="pipeline-graph-title" viewBox={`0 0 ${width} ${height}`} width={width} height={height} data-testid="pipeline-graph">
        <title id="pipeline-graph-title">
          Graph of the stages and where each outcome leads{current ? `; the ticket is at ${current}` : ""}
        </title>
        <defs>
          {OUTCOMES.map((o) => (
            <marker id={`arrow-${o}`} class={`pg-${o}`} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" />
            </marker>
          ))}
        </defs>
        {edges.map((e) => {
          const o = e.outcomes[0];
          const up = o === "done";
          const y = up ? top : top + H;
          let d: string, lx: number, ly: number;
          if (up && e.to === e.from + 1) {
            d = `M${x(e.from) + W},${top + H / 2} L${x(e.to)},${top + H / 2}`;
            lx = x(e.from) + W + GAP / 2;
            ly = top + H / 2 - 4;
          } else {
            const h = up ? -lift(e) : lift(e);
            const k = edges.indexOf(e);
            const x1 = port.get(`${k}from`)!;
            const x2 = port.get(`${k}to`)!;
            d = `M${x1},${y} C${x1},${y + h} ${x2},${y + h} ${x2},${y}`;
            lx = (x1 + x2) / 2;
            ly = y + h * 0.75 + (up ? -3 : 10);
          }
          return (
            <g class={`pg-${o}`} data-edge={`${name(e.from)}:${e.outcomes.join(",")}:${name(e.to)}`}>
              <title>{`${name(e.from)}: ${e.outcomes.join(", ")} → ${name(e.to)}${e.written ? "" : " (default)"}`}</title>
              <path d={d} fill="none" stroke-width="1.5" stroke-dasharray={e.written ? undefined : "4 3"} marker-end={`url(#arrow-${o})`} />
              <text x={lx} y={ly} text-anchor="middle">
                {e.outcomes.join(", ")}
              </text>
            </g>
          );
        })}
        {nodes.map((n, i) => {
          const special = i >= ids.length;
          const lit = !special && !!current && n === current;
          return (
            <g class={"pg-node" + (special ? " special" : "") + (lit ? " current" : "")} data-stage={n} aria-current={lit ? "step" : undefined}>
              <rect x={x(i)} y={top} width={W} height={H} rx={special ? H / 2 : 6} />
              <text x={mid(i)} y={top + H / 2 + 5} text-anchor="middle">
                {cut(n || `stage ${i + 1}`)}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

function cut(s: string) {
  return s.length > 18 ? s.slice(0, 17) + "…" : s;
}
