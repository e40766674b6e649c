// Syntax highlighting of diff lines with highlight.js's core and only the
// languages Ballet's projects mostly hold (about 25 KB gzipped, loaded with
// the ticket page's changes only). A line is highlighted on its own: a
// string or comment opened on an earlier line is not known, which a diff
// (hunks, not whole files) could not promise anyway.
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import go from "highlight.js/lib/languages/go";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import typescript from "highlight.js/lib/languages/typescript";
import yaml from "highlight.js/lib/languages/yaml";

hljs.registerLanguage("go", go);
hljs.registerLanguage("typescript", typescript); // JavaScript too: TypeScript's grammar reads it
hljs.registerLanguage("yaml", yaml);
hljs.registerLanguage("json", json);
hljs.registerLanguage("markdown", markdown);
hljs.registerLanguage("python", python);
hljs.registerLanguage("bash", bash);

const byExt: Record<string, string> = {
  go: "go",
  ts: "typescript",
  tsx: "typescript",
  js: "typescript",
  jsx: "typescript",
  mjs: "typescript",
  cjs: "typescript",
  yaml: "yaml",
  yml: "yaml",
  json: "json",
  md: "markdown",
  py: "python",
  sh: "bash",
  bash: "bash",
};

// language is the highlight.js language of a path ("" for none).
export function language(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  const dot = base.lastIndexOf(".");
  return dot < 0 ? "" : (byExt[base.slice(dot + 1).toLowerCase()] ?? "");
}

// highlight returns a line as HTML (highlight.js escapes the text), or
// null when the path has no language.
export function highlight(lang: string, line: string): string | null {
  if (!lang || !line) return null;
  return hljs.highlight(line, { language: lang, ignoreIllegals: true }).value;
}
