// Compare two published versions of a pipeline: each is rendered to its
// canonical YAML by the API and the two are diffed line by line (jsdiff),
// unchanged stretches folded to a few lines of context. Loaded with the
// pipelines page only.
import { useEffect, useState } from "preact/hooks";
import { message } from "../load";
import { Alert } from "../ui";
import { type Row, rows } from "./linediff";
import { clean, type Definition, type PipelineVersion } from "./model";

interface Props {
  versions: PipelineVersion[]; // newest first
  render: (d: Definition) => Promise<{ yaml: string }>;
}

export function VersionDiff({ versions, render }: Props) {
  const [from, setFrom] = useState(versions[1]?.version ?? versions[0]?.version ?? 0);
  const [to, setTo] = useState(versions[0]?.version ?? 0);
  const [result, setResult] = useState<{ pair: string; rows: Row[] } | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    const a = versions.find((v) => v.version === from);
    const b = versions.find((v) => v.version === to);
    if (!a || !b) return;
    let gone = false;
    setError("");
    Promise.all([render(clean(a.definition)), render(clean(b.definition))]).then(
      ([x, y]) => !gone && setResult({ pair: `${from}:${to}`, rows: rows(x.yaml, y.yaml) }),
      (e) => !gone && setError(`Comparing the versions failed: ${message(e)}`),
    );
    return () => void (gone = true);
  }, [from, to, versions]);

  // A diff of the versions chosen before is no answer for these.
  const diff = result?.pair === `${from}:${to}` ? result.rows : null;
  const added = diff?.filter((r) => r.kind === "add").length ?? 0;
  const removed = diff?.filter((r) => r.kind === "del").length ?? 0;
  const pick = (label: string, value: number, set: (n: number) => void, testid: string) => (
    <label>
      {label}{" "}
      <select value={value} onChange={(e) => set(Number(e.currentTarget.value))} data-testid={testid}>
        {versions.map((v) => (
          <option value={v.version}>
            {v.version === 0 ? "0 (template)" : `version ${v.version}`}
            {v.created_by ? ` · ${v.created_by}` : ""}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <section aria-labelledby="compare-title" data-testid="version-compare">
      <h3 id="compare-title">Compare versions</h3>
      <div class="diff-pick">
        {pick("From", from, setFrom, "diff-from")}
        {pick("To", to, setTo, "diff-to")}
        <span class="muted" role="status" data-testid="diff-summary">
          {diff && (from === to ? "The same version." : added || removed ? `${added} line${added === 1 ? "" : "s"} added, ${removed} removed.` : "No difference.")}
        </span>
      </div>
      <Alert error={error} />
      {diff && (added > 0 || removed > 0) && (
        <div class="version-diff" data-testid="version-diff" role="region" tabIndex={0} aria-label={`Changes from version ${from} to version ${to}`}>
          <div role="table" aria-label={`Lines of version ${from} and version ${to}`}>
            {diff.map((r) =>
              r.kind === "fold" ? (
                <div class="fold muted" role="row">
                  <span role="cell">⋯ {r.folded} unchanged lines</span>
                </div>
              ) : (
                <div class={r.kind} role="row">
                  <span class="ln" role="cell">
                    {r.old ?? ""}
                  </span>
                  <span class="ln" role="cell">
                    {r.new ?? ""}
                  </span>
                  <span role="cell">
                    <span class="sign" aria-hidden="true">
                      {r.kind === "add" ? "+" : r.kind === "del" ? "−" : " "}
                    </span>
                    {r.kind !== "same" && <span class="sr">{r.kind === "add" ? "added: " : "removed: "}</span>}
                    {r.text}
                  </span>
                </div>
              ),
            )}
          </div>
        </div>
      )}
    </section>
  );
}
