// Prints the gzipped JavaScript a first visit downloads: the entry chunk and
// the chunks it imports, plus each first page's chunk and its imports (from
// Vite's manifest), and fails when one exceeds the budget.
// The ticket page is measured too, with the chunks it imports when it opens.
// Usage: node scripts/size.mjs [budget KB] (default 250).
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const dist = new URL("../../internal/webui/dist/", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL(".vite/manifest.json", dist), "utf8"));
const budget = Number(process.argv[2] ?? 250) * 1024;

// closure is a chunk with the chunks it imports statically, as files.
function closure(key, out = new Set()) {
  const c = manifest[key];
  if (!c) throw new Error(`no chunk ${key} in the manifest`);
  if (out.has(c.file)) return out;
  out.add(c.file);
  for (const i of c.imports ?? []) closure(i, out);
  return out;
}

const gz = (file) => gzipSync(readFileSync(new URL(file, dist)), { level: 9 }).length;
const kb = (n) => (n / 1024).toFixed(1) + " KB";

// The pages a visit can open first: signing in, then "Needs me".
const pages = { "/signin": "src/pages/signin.tsx", "/needs-me": "src/pages/needsme.tsx" };
let over = false;
for (const [route, src] of Object.entries(pages)) {
  const files = closure(src, closure("index.html"));
  const js = [...files].filter((f) => f.endsWith(".js"));
  const total = js.reduce((n, f) => n + gz(f), 0);
  console.log(`${route}: ${kb(total)} gzipped JS (budget ${kb(budget)}) in ${js.length} files: ${js.join(", ")}`);
  if (total > budget) over = true;
}
// The ticket page, with the chunk it loads itself (the changes' diff
// viewer and highlight.js: not part of a first visit, measured here so it
// stays small).
{
  const files = closure("src/pages/ticket.tsx", closure("index.html"));
  for (const d of manifest["src/pages/ticket.tsx"].dynamicImports ?? []) closure(d, files);
  const js = [...files].filter((f) => f.endsWith(".js"));
  const total = js.reduce((n, f) => n + gz(f), 0);
  console.log(`/items/KEY with its changes: ${kb(total)} gzipped JS in ${js.length} files: ${js.join(", ")}`);
  if (total > budget) over = true;
}
if (over) {
  console.error("size.mjs: a first page is over the budget");
  process.exit(1);
}
