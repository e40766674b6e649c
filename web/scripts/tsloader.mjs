// Module hooks that let Node run the UI's TypeScript modules as they are
// (scripts/unit.mjs): a relative import without an extension finds its .ts
// or .tsx file, and .ts/.tsx files are transpiled (types dropped, JSX for
// Preact) without a type check; `npm run typecheck` does that.
import { readFile } from "node:fs/promises";
import ts from "typescript";

export async function resolve(spec, ctx, next) {
  if (/^\.\.?\//.test(spec) && !/\.[cm]?[jt]sx?$/.test(spec)) {
    for (const ext of [".ts", ".tsx"]) {
      try {
        return await next(spec + ext, ctx);
      } catch {
        // try the next extension
      }
    }
  }
  return next(spec, ctx);
}

export async function load(url, ctx, next) {
  if (!/\.tsx?$/.test(url)) return next(url, ctx);
  const source = await readFile(new URL(url), "utf8");
  const out = ts.transpileModule(source, {
    fileName: url,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      jsx: ts.JsxEmit.ReactJSX,
      jsxImportSource: "preact",
    },
  });
  return { format: "module", source: out.outputText, shortCircuit: true };
}
