// What a ticket's branch changes against its base, as a person judges it
// before approving: the branch and its head, the pull request with its
// checks and reviews (when the forge has one), the commits grouped by the
// stage of Ballet's runner that made them, and the files with a readable
// diff each (unified or side by side, highlighted, a large one collapsed).
// Loaded by the ticket page only (a dynamic import: the first pages do not
// carry the diff viewer and highlight.js).
import { Component } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { BranchPull, Changes, ChangedFile } from "../api";
import { Ago, Badge } from "../ui";
import "./changes.css";
import { highlight, language } from "./highlight";
import { parse, split, type Pair, type Row } from "./patch";

// bigLines: a file's diff longer than this is collapsed until asked for.
const bigLines = 400;

// short is a commit id as people read it.
export const short = (sha: string) => sha.slice(0, 7);

// ChangesView is compared again only when new changes are read, not on
// each of the ticket page's renders (every load, every live event).
export default class ChangesView extends Component<{ c: Changes }> {
  shouldComponentUpdate(next: { c: Changes }) {
    return next.c !== this.props.c;
  }
  render() {
    return <View c={this.props.c} />;
  }
}

function View({ c }: { c: Changes }) {
  const [sideBySide, setSideBySide] = useState(false);
  const adds = c.files.reduce((n, f) => n + f.additions, 0);
  const dels = c.files.reduce((n, f) => n + f.deletions, 0);
  return (
    <section class="changes" aria-labelledby="changes-h" data-testid="changes" data-head={c.head}>
      <h3 id="changes-h">Changes</h3>
      <p class="row" data-testid="changes-branch">
        <code>{c.branch}</code>
        <span>
          → merge into <code>{c.base}</code>
        </span>
        {c.head && (
          <span>
            · head{" "}
            <code data-testid="changes-head" title={c.head}>
              {short(c.head)}
            </code>
          </span>
        )}
        {c.head && (
          <span>
            · {c.ahead} commit{c.ahead === 1 ? "" : "s"} ahead of {c.base}
          </span>
        )}
        {c.files.length > 0 && (
          <span>
            · {c.files.length}
            {c.files_truncated ? "+" : ""} file{c.files.length === 1 ? "" : "s"} <Counts adds={adds} dels={dels} />
          </span>
        )}
      </p>
      {!c.head && <p class="muted">The branch {c.branch} was not pushed yet: there is no change to read.</p>}
      {c.head && c.ahead === 0 && (
        <p class="muted">
          {c.branch} has no commit that {c.base} has not: there is no change to read.
        </p>
      )}
      {c.note && (
        <p class="notice" data-testid="changes-note">
          {c.note}
        </p>
      )}
      {c.pull_request && <PullRequest p={c.pull_request} />}
      {c.commits.length > 0 && <Commits c={c} />}
      {c.files.length > 0 && (
        <>
          <h4>Files</h4>
          <ul class="files" data-testid="files">
            {c.files.map((f, i) => (
              <li key={f.path}>
                <a href={`#diff-${i}`} onClick={goTo(i)}>
                  {f.path}
                </a>{" "}
                <span class="muted">{f.status}</span> <Counts adds={f.additions} dels={f.deletions} />
              </li>
            ))}
          </ul>
          <p class="segmented" role="group" aria-label="Diff layout">
            <button type="button" aria-pressed={!sideBySide} onClick={() => setSideBySide(false)}>
              Unified
            </button>
            <button type="button" aria-pressed={sideBySide} onClick={() => setSideBySide(true)}>
              Split
            </button>
          </p>
          {c.files.map((f, i) => (
            <FileDiff key={c.head + f.path} f={f} i={i} sideBySide={sideBySide} />
          ))}
        </>
      )}
    </section>
  );
}

// goTo scrolls to a file's diff without touching the address (its hash
// selects a run's session).
const goTo = (i: number) => (e: Event) => {
  e.preventDefault();
  const el = document.getElementById(`diff-${i}`);
  el?.scrollIntoView({ block: "start" });
  el?.querySelector<HTMLElement>("h4")?.focus({ preventScroll: true });
};

function Counts({ adds, dels }: { adds: number; dels: number }) {
  return (
    <span class="counts">
      <span class="plus">
        +{adds}
        <span class="sr"> lines added,</span>
      </span>{" "}
      <span class="minus">
        −{dels}
        <span class="sr"> lines removed</span>
      </span>
    </span>
  );
}

const mergeable = (m: boolean | null) => (m === null ? "the forge is still checking whether it merges" : m ? "merges cleanly" : "has conflicts");

function PullRequest({ p }: { p: BranchPull }) {
  return (
    <div class="pull" data-testid="pull-request">
      <h4>
        Pull request{" "}
        <a href={p.url} rel="noopener noreferrer" target="_blank">
          #{p.number}
        </a>
      </h4>
      <p>
        <Badge kind={p.state}>{p.state}</Badge> {p.state === "open" && mergeable(p.mergeable)}
      </p>
      {p.checks.length > 0 ? (
        <ul class="checks" aria-label="Checks" data-testid="checks">
          {p.checks.map((k) => (
            <li key={k.name}>
              <Badge kind={`check-${k.state}`}>{k.state}</Badge>{" "}
              {k.url ? (
                <a href={k.url} rel="noopener noreferrer" target="_blank">
                  {k.name}
                </a>
              ) : (
                k.name
              )}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No checks reported on the head commit.</p>
      )}
      {p.reviews.length > 0 ? (
        <ul class="reviews" aria-label="Reviews" data-testid="reviews">
          {p.reviews.map((r) => (
            <li key={r.reviewer}>
              {r.url ? (
                <a href={r.url} rel="noopener noreferrer" target="_blank">
                  {r.reviewer}
                </a>
              ) : (
                r.reviewer
              )}
              : {r.state.replace(/_/g, " ")}
              {r.stale && (
                <>
                  {" "}
                  <Badge kind="stale">stale: given before the last push</Badge>
                </>
              )}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No reviews.</p>
      )}
    </div>
  );
}

// Commits lists the commits (newest first) in groups: each stage of
// Ballet's runner that made some, then the others.
function Commits({ c }: { c: Changes }) {
  const groups = useMemo(() => {
    const m = new Map<string, Changes["commits"]>();
    for (const x of c.commits) {
      const k = x.stage ?? "";
      m.set(k, [...(m.get(k) ?? []), x]);
    }
    return [...m.entries()];
  }, [c.commits]);
  // A run's link selects its session in Runs (which follows the
  // address's #run-ID) and scrolls there; the router would only push.
  const toRun = (run: string) => (e: Event) => {
    e.preventDefault();
    e.stopPropagation();
    history.replaceState(null, "", `#run-${run}`);
    dispatchEvent(new HashChangeEvent("hashchange"));
    requestAnimationFrame(() => document.getElementById("runs")?.scrollIntoView({ block: "start" }));
  };
  return (
    <>
      <h4>Commits</h4>
      {c.commits_truncated && <p class="muted">Only the newest {c.commits.length} commits are listed.</p>}
      {groups.map(([stage, commits]) => (
        <div key={stage} class="commit-group" data-testid="commit-group" data-stage={stage}>
          <h5>{stage ? `Stage ${stage}` : "Not made by a Ballet run"}</h5>
          <ul class="commits">
            {commits.map((x) => (
              <li key={x.sha} data-testid="commit">
                <span class="title">{x.title}</span>
                <span class="muted">
                  {" "}
                  <code title={x.sha}>{short(x.sha)}</code> by {x.author} <Ago at={x.time} />
                  {x.run && (
                    <>
                      {" · "}
                      <a href={`#run-${x.run}`} onClick={toRun(x.run)} aria-label={`The ${x.stage} run ${x.run} that made ${short(x.sha)}`}>
                        run
                      </a>
                    </>
                  )}
                </span>
              </li>
            ))}
          </ul>
        </div>
      ))}
    </>
  );
}

function FileDiff({ f, i, sideBySide }: { f: ChangedFile; i: number; sideBySide: boolean }) {
  const size = useMemo(() => (f.patch ? f.patch.split("\n").length : 0), [f.patch]);
  const [open, setOpen] = useState(size <= bigLines);
  // Parsed once per patch (the page renders again on every live event);
  // shown as plain text first and highlighted once the file comes near
  // the screen, a file per task: a long diff is readable and the page
  // usable at once.
  const rows = useMemo(() => (open && f.patch ? parse(f.patch) : []), [open, f.patch]);
  const [html, setHtml] = useState<(string | null)[] | null>(null);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    setHtml(null);
    const lang = language(f.path);
    if (!lang || !rows.length || !box.current) return;
    let timer: number | undefined;
    const seen = new IntersectionObserver(
      (es) => {
        if (!es.some((e) => e.isIntersecting)) return;
        seen.disconnect();
        timer = window.setTimeout(() => setHtml(rows.map((r) => (r.kind === "hunk" || r.kind === "note" ? null : highlight(lang, r.text)))), 0);
      },
      { rootMargin: "600px 0px" },
    );
    seen.observe(box.current);
    return () => {
      seen.disconnect();
      clearTimeout(timer);
    };
  }, [rows, f.path]);
  const lines = useMemo(() => rows.map((r, k): Line => ({ ...r, html: html?.[k] ?? null })), [rows, html]);
  return (
    <div class="file" id={`diff-${i}`} ref={box} data-testid="file-diff" data-path={f.path} data-highlighted={html ? "1" : "0"}>
      <h4 tabIndex={-1}>
        {f.previous_path && f.previous_path !== f.path ? (
          <>
            {f.previous_path} → {f.path}
          </>
        ) : (
          f.path
        )}{" "}
        <span class="muted">{f.status}</span> <Counts adds={f.additions} dels={f.deletions} />
      </h4>
      {f.binary ? (
        <p class="muted">A binary file: no lines to show.</p>
      ) : !f.patch && !f.truncated ? (
        <p class="muted">No changed lines (a mode change, a rename or an empty file).</p>
      ) : !open ? (
        <p>
          <button type="button" class="secondary" onClick={() => setOpen(true)}>
            Show the {size.toLocaleString("en")}-line diff of {f.path}
          </button>
        </p>
      ) : (
        f.patch && (
          <div class="scroll">
            {sideBySide ? <SplitTable rows={lines} path={f.path} /> : <UnifiedTable rows={lines} path={f.path} />}
          </div>
        )
      )}
      {f.truncated && (
        <p class="notice" data-testid="file-truncated">
          {f.patch
            ? "The patch of this file is cut: it is longer than Ballet shows. Read the rest on the branch itself."
            : "The patch of this file is left out: the change is larger than Ballet shows. Read it on the branch itself."}
        </p>
      )}
      {open && size > bigLines && (
        <p>
          <button type="button" class="secondary" onClick={() => setOpen(false)}>
            Hide the diff of {f.path}
          </button>
        </p>
      )}
    </div>
  );
}

const sign: Record<Row["kind"], string> = { add: "+", del: "-", context: " ", hunk: "", note: "" };

// Line is a row with its highlighted HTML (null: shown as plain text).
type Line = Row & { html: string | null };

// The rows of a diff are written as one HTML string a table (a 2,000-line
// diff is 2,000 rows: built as text and parsed by the browser at once, not
// as 10,000 virtual nodes compared and created one by one). Every text is
// escaped; highlighted HTML comes escaped from highlight.js.
const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => escapes[c]);
const num = (n: number | undefined) => (n === undefined ? "" : String(n));
const code = (r: Line) => `<span class="sign">${sign[r.kind]}</span><code>${r.html ?? esc(r.text)}</code>`;

function unifiedRows(rows: Line[]): string {
  let out = "";
  for (const r of rows) {
    out +=
      r.kind === "hunk" || r.kind === "note"
        ? `<tr class="${r.kind}"><td colspan="3">${esc(r.text)}</td></tr>`
        : `<tr class="${r.kind}"><td class="ln">${num(r.old)}</td><td class="ln">${num(r.new)}</td><td class="code">${code(r)}</td></tr>`;
  }
  return out;
}

function splitRows(pairs: Pair<Line>[]): string {
  const side = (r: Line | undefined, n: number | undefined) => {
    const k = r?.kind ?? "empty";
    return `<td class="ln ${k}">${num(n)}</td><td class="code ${k}">${r ? code(r) : ""}</td>`;
  };
  let out = "";
  for (const p of pairs) {
    out += p.full
      ? `<tr class="${p.full.kind}"><td colspan="4">${esc(p.full.text)}</td></tr>`
      : `<tr>${side(p.left, p.left?.old)}${side(p.right, p.right?.new)}</tr>`;
  }
  return out;
}

function UnifiedTable({ rows, path }: { rows: Line[]; path: string }) {
  const body = useMemo(() => ({ __html: unifiedRows(rows) }), [rows]);
  return (
    <table class="diff">
      <caption class="sr">Diff of {path}</caption>
      <thead class="sr">
        <tr>
          <th scope="col">Base line</th>
          <th scope="col">Branch line</th>
          <th scope="col">Change</th>
        </tr>
      </thead>
      <tbody dangerouslySetInnerHTML={body} />
    </table>
  );
}

function SplitTable({ rows, path }: { rows: Line[]; path: string }) {
  const body = useMemo(() => ({ __html: splitRows(split(rows)) }), [rows]);
  return (
    <table class="diff split">
      <caption class="sr">Diff of {path}, side by side</caption>
      <thead class="sr">
        <tr>
          <th scope="col">Base line</th>
          <th scope="col">Base</th>
          <th scope="col">Branch line</th>
          <th scope="col">Branch</th>
        </tr>
      </thead>
      <tbody dangerouslySetInnerHTML={body} />
    </table>
  );
}
