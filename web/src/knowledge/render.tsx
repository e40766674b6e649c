// Rendering what the service sends: Markdown bodies (sanitised), search
// snippets (only <mark> becomes markup) and unified diffs.
import DOMPurify from "dompurify";
import { Marked } from "marked";

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

// escapeHTML makes text safe to place in HTML as text.
function escapeHTML(s: string): string {
  return s.replace(/[&<>"']/g, (c) => escapes[c]);
}

// md renders GitHub-flavoured Markdown with raw HTML shown as text: markup
// an entry's author typed never reaches a parser, so not even the browser's
// inert parsing inside the sanitiser sees an event handler (Chromium reports
// those to the page's Content-Security-Policy even there).
const md = new Marked({ gfm: true, async: false, renderer: { html: ({ text }) => escapeHTML(text) } });

// markdown renders an entry's body as sanitised HTML: Markdown's own
// elements only, and DOMPurify behind it as a second line.
export function markdown(src: string): string {
  const html = md.parse(src) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}

export function Markdown({ src, label }: { src: string; label: string }) {
  return <div class="kn-markdown" aria-label={label} role="region" dangerouslySetInnerHTML={{ __html: markdown(src) }} />;
}

const entities: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

// unescape decodes the character references of HTML-escaped text.
export function unescape(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, ref: string) => {
    if (ref[0] === "#") {
      const n = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return n > 0 && n <= 0x10ffff && !(n >= 0xd800 && n <= 0xdfff) ? String.fromCodePoint(n) : m;
    }
    return entities[ref.toLowerCase()] ?? m;
  });
}

// Snippet shows a search snippet: the service's HTML-escaped text with
// <mark>…</mark> around the hits. Only those marks become elements; every
// other part is text, so nothing else the snippet holds is ever markup.
export function Snippet({ html }: { html: string }) {
  const out = [];
  let marked = false;
  for (const part of html.split(/(<mark>|<\/mark>)/)) {
    if (part === "<mark>") marked = true;
    else if (part === "</mark>") marked = false;
    else if (part) out.push(marked ? <mark>{unescape(part)}</mark> : unescape(part));
  }
  return <p class="kn-snippet">{out}</p>;
}

type Line = { kind: "add" | "del" | "ctx" | "hunk"; text: string };

// diffLines reads a unified diff into its lines, without the file headers
// (everything before the first hunk).
export function diffLines(diff: string): Line[] {
  const lines: Line[] = [];
  let inHunk = !diff.includes("\n@@") && !diff.startsWith("@@");
  for (const l of diff.split("\n")) {
    if (l.startsWith("@@")) {
      inHunk = true;
      lines.push({ kind: "hunk", text: l });
    } else if (!inHunk || l.startsWith("\\")) continue;
    else if (l.startsWith("+")) lines.push({ kind: "add", text: l.slice(1) });
    else if (l.startsWith("-")) lines.push({ kind: "del", text: l.slice(1) });
    else if (l.startsWith(" ")) lines.push({ kind: "ctx", text: l.slice(1) });
  }
  return lines;
}

const sign = { add: "+", del: "−", ctx: " ", hunk: "" };
const spoken = { add: "added: ", del: "removed: ", ctx: "", hunk: "" };

export function DiffView({ diff, from, to }: { diff: string; from: number; to: number }) {
  const lines = diffLines(diff);
  const adds = lines.filter((l) => l.kind === "add").length;
  const dels = lines.filter((l) => l.kind === "del").length;
  return (
    <section aria-label={`Changes from version ${from} to version ${to}`} data-testid="diff">
      <h3>
        Version {from} → version {to}: {adds} added, {dels} removed
      </h3>
      {lines.length === 0 ? (
        <p>No differences.</p>
      ) : (
        <div class="kn-diff">
          {lines.map((l, i) => (
            <div key={i} class={`kn-${l.kind}`} data-kind={l.kind}>
              <span class="kn-sign" aria-hidden="true">
                {sign[l.kind]}
              </span>
              <span class="kn-sr">{spoken[l.kind]}</span>
              {l.text}
            </div>
          ))}
        </div>
      )}
    </section>
  );
}
