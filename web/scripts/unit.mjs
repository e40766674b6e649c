// Runs the UI's unit tests (test/*.test.ts, node:test) on the TypeScript
// sources, through the hooks in tsloader.mjs. Usage: node scripts/unit.mjs
import { readdirSync } from "node:fs";
import { register } from "node:module";

register("./tsloader.mjs", import.meta.url);
const dir = new URL("../test/", import.meta.url);
for (const f of readdirSync(dir).filter((f) => f.endsWith(".test.ts")).sort()) {
  await import(new URL(f, dir).href);
}
