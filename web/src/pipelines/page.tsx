// The pipelines editor (spec pipelines.md "Editing in the UI"): choose
// default or a ticket type's pipeline, edit it in the Stages form or as
// YAML (kept in sync both ways through the render and parse endpoints),
// see its problems as you edit, export, import, publish, and load an older
// version from History. Callers without project.update only read.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api";
import { message, useLoad } from "../load";
import { navigate, useLocation } from "../router";
import { Alert } from "../ui";
import * as api from "./api";
import { Graph } from "./graph";
import { clean, type Definition, fieldOf, type PipelineVersion, type Problem, problemsByField } from "./model";
import { StagesForm } from "./stages";
import { VersionDiff } from "./versiondiff";
import type { YamlEditor } from "./yamleditor";
import "./pipelines.css";

const DEBOUNCE_MS = 300;

// Doc is what the editor holds: the definition (null when the YAML cannot
// be read), its YAML and the problems found in that YAML.
interface Doc {
  def: Definition | null;
  yaml: string;
  problems: Problem[];
  // An edit not yet checked by the server, and where it was made: while a
  // YAML edit is checked the form waits for what it defines.
  checking: "" | "form" | "yaml";
}

interface Loaded {
  key: string; // the project's key
  types: string[];
  own: string[]; // names with a pipeline of their own
  versions: PipelineVersion[];
  base: number; // the version the edit is based on: the latest
  startsFrom: string; // "default" for a type without its own pipeline
  savedYaml: string; // the YAML of what was loaded, to tell an edit
}

interface Conflict {
  latest?: PipelineVersion;
}

export default function Page({ project }: Record<string, string>) {
  const name = useLocation().searchParams.get("name") || "default";
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [doc, setDoc] = useState<Doc>({ def: null, yaml: "", problems: [], checking: "" });
  const [readOnly, setReadOnly] = useState(false);
  const [error, setError] = useState("");
  const [notice, setNotice] = useState("");
  const [conflict, setConflict] = useState<Conflict | null>(null);
  const [fromVersion, setFromVersion] = useState<number | null>(null); // loaded from History
  const [busy, setBusy] = useState(false);
  const [tab, setTab] = useState<"stages" | "yaml">("stages");

  const seq = useRef(0); // the latest edit; older answers are dropped
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const editor = useRef<YamlEditor | null>(null);
  const editorBox = useRef<HTMLDivElement>(null);
  const pendingReveal = useRef<Problem | null>(null); // once the editor exists
  const docRef = useRef(doc);
  docRef.current = doc;

  // show puts a definition into the editor as canonical YAML, with its
  // problems.
  async function show(def: Definition, n: number) {
    const { yaml } = await api.render(clean(def));
    if (n !== seq.current) return null;
    const { errors } = await api.parse(yaml);
    if (n !== seq.current) return null;
    editor.current?.set(yaml);
    setDoc({ def, yaml, problems: errors, checking: "" });
    return yaml;
  }

  // The first load (and "Load the newer version"): the project's ticket
  // types, the pipelines that exist, this one's versions, the caller's
  // permissions; the latest version (or default's, for a type without its
  // own) goes into the editor.
  const initial = useLoad(async () => {
    const n = ++seq.current;
    clearTimeout(timer.current);
    setError("");
    setConflict(null);
    setFromVersion(null);
    const [proj, list, vs, perms] = await Promise.all([
      api.getProject(project),
      api.listPipelines(project),
      api.listVersions(project, name),
      api.permissions(project),
    ]);
    if (perms) setReadOnly(!perms.has("project.update"));
    const latest = vs.versions[0];
    const start = latest?.definition ?? list.pipelines.find((p) => p.name === "default")?.definition ?? { stages: [] };
    const yaml = await show(start, n);
    if (yaml === null) return; // an edit came meanwhile
    setLoaded({
      key: proj.key,
      types: proj.ticket_types ?? [],
      own: list.pipelines.map((p) => p.name),
      versions: vs.versions,
      base: latest?.version ?? 0,
      startsFrom: latest ? "" : "default",
      savedYaml: yaml,
    });
  }, [project, name]);

  useEffect(() => setNotice(""), [project, name]);

  // An edit in the form: render it as YAML, then check that YAML.
  function editForm(def: Definition) {
    const n = ++seq.current;
    setDoc((d) => ({ ...d, def, checking: "form" }));
    clearTimeout(timer.current);
    timer.current = setTimeout(() => {
      show(def, n).catch((e) => n === seq.current && failCheck(e));
    }, DEBOUNCE_MS);
  }

  // An edit in the YAML: check it, and show what it defines in the form.
  function editYaml(yaml: string) {
    const n = ++seq.current;
    setDoc((d) => ({ ...d, yaml, checking: "yaml" }));
    clearTimeout(timer.current);
    timer.current = setTimeout(async () => {
      try {
        const r = await api.parse(yaml);
        if (n !== seq.current) return;
        setDoc({ def: r.definition ?? null, yaml, problems: r.errors, checking: "" });
      } catch (e) {
        if (n === seq.current) failCheck(e);
      }
    }, DEBOUNCE_MS);
  }

  function failCheck(e: unknown) {
    setError(`Checking the pipeline failed: ${message(e)}`);
    setDoc((d) => ({ ...d, checking: "" }));
  }

  // The YAML editor is created when its tab is first shown.
  useEffect(() => {
    if (tab !== "yaml" || editor.current || !editorBox.current) return;
    let gone = false;
    import("./yamleditor").then(({ createEditor }) => {
      if (gone || editor.current || !editorBox.current) return;
      editor.current = createEditor(editorBox.current, docRef.current.yaml, readOnly, editYaml);
      editor.current.problems(docRef.current.yaml, docRef.current.problems);
      if (pendingReveal.current) editor.current.reveal(pendingReveal.current);
    }, (e) => setError(`Loading the YAML editor failed: ${message(e)}`));
    return () => void (gone = true);
  }, [tab]);
  useEffect(() => () => editor.current?.destroy(), []);
  useEffect(() => editor.current?.readOnly(readOnly), [readOnly]);
  useEffect(() => {
    if (!doc.checking) editor.current?.problems(doc.yaml, doc.problems);
  }, [doc]);

  async function onPublish() {
    if (!loaded) return;
    setBusy(true);
    setError("");
    setNotice("");
    try {
      const v = await api.publish(project, name, loaded.base, doc.yaml);
      const vs = await api.listVersions(project, name);
      setLoaded({ ...loaded, versions: vs.versions, base: v.version, startsFrom: "", savedYaml: doc.yaml, own: [...new Set([...loaded.own, name])] });
      setFromVersion(null);
      setNotice(`Published version ${v.version}.`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        setConflict({ latest: await api.getLatest(project, name).catch(() => undefined) });
      } else if (e instanceof ApiError && e.status === 403) {
        setReadOnly(true);
        setError(`You may only read this project's pipelines: ${e.message}`);
      } else if (e instanceof ApiError && e.status === 400 && e.details.length && "code" in (e.details[0] as object)) {
        setDoc((d) => ({ ...d, problems: e.details as Problem[] }));
      } else {
        setError(message(e));
      }
    } finally {
      setBusy(false);
    }
  }

  async function onExport() {
    if (!doc.def || !loaded) return;
    try {
      const { yaml } = await api.render(clean(doc.def));
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([yaml], { type: "application/yaml" }));
      a.download = `${loaded.key}-${name}.yaml`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 0);
    } catch (e) {
      setError(`Export failed: ${message(e)}`);
    }
  }

  async function onImport(input: HTMLInputElement) {
    const file = input.files?.[0];
    if (!file) return;
    const text = await file.text();
    input.value = ""; // the same file can be imported again
    editor.current?.set(text);
    editYaml(text);
    setFromVersion(null);
    setNotice(`Imported ${file.name}; it is not published until you publish it.`);
  }

  function onLoadVersion(v: PipelineVersion) {
    const n = ++seq.current;
    clearTimeout(timer.current);
    setDoc((d) => ({ ...d, checking: "form" }));
    show(v.definition, n).then(
      (yaml) => {
        if (yaml === null) return;
        setFromVersion(v.version);
        setNotice(readOnly ? `Showing version ${v.version}.` : `Version ${v.version} is in the editor; publish it to make it the newest version.`);
      },
      (e) => n === seq.current && failCheck(e),
    );
  }

  // showField focuses the form element a problem belongs to.
  function showField(p: Problem) {
    setTab("stages");
    requestAnimationFrame(() => {
      const el = document.querySelector<HTMLElement>(`[data-testid="${CSS.escape(fieldOf(p.path))}"]`);
      el?.scrollIntoView({ block: "center" });
      (el?.matches("input, select, textarea") ? el : el?.querySelector<HTMLElement>("input, select, textarea"))?.focus();
    });
  }

  // showLine puts the YAML editor's cursor where a problem is.
  function showLine(p: Problem) {
    setTab("yaml");
    if (editor.current) requestAnimationFrame(() => editor.current?.reveal(p));
    else pendingReveal.current = p;
  }

  function choose(next: string) {
    if (next === name) return;
    if (loaded && dirty && !confirm("Discard the changes you have not published?")) return;
    navigate(`/projects/${encodeURIComponent(project)}/pipelines?name=${encodeURIComponent(next)}`);
  }

  const dirty = !!loaded && (doc.yaml !== loaded.savedYaml || fromVersion !== null);
  const byField = problemsByField(doc.problems);
  const canPublish = !readOnly && !!loaded && !!doc.def && !doc.checking && doc.problems.length === 0 && !busy;
  const names = ["default", ...(loaded?.types ?? [])];

  return (
    <section class="pipelines" aria-labelledby="pipelines-title">
      <h1 id="pipelines-title">Pipelines of {loaded?.key ?? project}</h1>
      <Alert error={initial.error || error} />
      <div class="pipelines-bar">
        <label>
          Pipeline{" "}
          <select value={name} onChange={(e) => choose(e.currentTarget.value)} data-testid="pipeline-name">
            {(names.includes(name) ? names : [...names, name]).map((n) => (
              <option value={n}>{n === "default" || !loaded || loaded.own.includes(n) ? n : `${n} (uses default)`}</option>
            ))}
          </select>
        </label>
        <button type="button" class="secondary" onClick={onExport} disabled={!doc.def || !!doc.checking}>
          Export YAML
        </button>
        {!readOnly && (
          <>
            <label class="import">
              Import YAML <input type="file" accept=".yaml,.yml,application/yaml,text/yaml" data-testid="import-yaml" onChange={(e) => onImport(e.currentTarget)} />
            </label>
            <button type="button" class="primary" onClick={onPublish} disabled={!canPublish} aria-describedby="publish-state">
              Publish
            </button>
            <span id="publish-state" class="muted" data-testid="publish-state">
              {doc.checking
                ? "Checking…"
                : doc.problems.length
                  ? `Fix ${doc.problems.length} problem${doc.problems.length === 1 ? "" : "s"} to publish.`
                  : dirty
                    ? `Unpublished changes, based on version ${loaded?.base}.`
                    : loaded
                      ? `Version ${loaded.base}.`
                      : ""}
            </span>
          </>
        )}
      </div>
      {readOnly && <p class="muted">You can read this project's pipelines; publishing needs the project.update permission.</p>}
      {loaded?.startsFrom && (
        <p data-testid="starts-from">
          {name} tickets have no pipeline of their own yet: they run on {loaded.startsFrom}.
          {readOnly ? " Shown here is default." : ` This starts from ${loaded.startsFrom}; publishing gives ${name} its own.`}
        </p>
      )}
      {notice && (
        <p role="status" data-testid="notice">
          {notice}
        </p>
      )}
      {conflict && (
        <div role="alert" class="alert" data-testid="conflict">
          <p>
            Someone published {conflict.latest ? `version ${conflict.latest.version}${conflict.latest.created_by ? ` (${conflict.latest.created_by})` : ""}` : "a newer version"} after
            version {loaded?.base}, which your edit is based on: nothing was published.
          </p>
          <button type="button" onClick={() => void initial.reload()}>
            Load the newer version
          </button>
        </div>
      )}
      {doc.problems.length > 0 && (
        <section class="problems" aria-labelledby="problems-title" data-testid="problems">
          <h2 id="problems-title">Problems ({doc.problems.length})</h2>
          <ul>
            {doc.problems.map((p) => (
              <li>
                {p.path && <code>{p.path}</code>} {p.message}{" "}
                {fieldOf(p.path) && (
                  <button type="button" class="link" onClick={() => showField(p)}>
                    in the form<span class="visually-hidden">: {p.path}</span>
                  </button>
                )}{" "}
                {p.line ? (
                  <button type="button" class="link" onClick={() => showLine(p)}>
                    line {p.line}
                    {p.column ? `:${p.column}` : ""}
                    <span class="visually-hidden"> in the YAML</span>
                  </button>
                ) : null}
              </li>
            ))}
          </ul>
        </section>
      )}

      <div
        role="tablist"
        aria-label="Edit as"
        onKeyDown={(e) => {
          if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
          const next = tab === "stages" ? "yaml" : "stages";
          setTab(next);
          document.getElementById(`tab-${next}`)?.focus();
        }}
      >
        <button type="button" role="tab" id="tab-stages" aria-controls="panel-stages" aria-selected={tab === "stages"} onClick={() => setTab("stages")}>
          Stages
        </button>
        <button type="button" role="tab" id="tab-yaml" aria-controls="panel-yaml" aria-selected={tab === "yaml"} onClick={() => setTab("yaml")}>
          YAML
        </button>
      </div>
      <div role="tabpanel" id="panel-stages" aria-labelledby="tab-stages" hidden={tab !== "stages"}>
        {doc.def ? (
          <fieldset class="plain" disabled={doc.checking === "yaml"}>
            <StagesForm def={doc.def} problems={byField} readOnly={readOnly} onChange={editForm} />
          </fieldset>
        ) : (
          loaded && <p>The YAML cannot be read as a pipeline; fix it in the YAML tab.</p>
        )}
      </div>
      <div role="tabpanel" id="panel-yaml" aria-labelledby="tab-yaml" hidden={tab !== "yaml"}>
        <div ref={editorBox} class="yaml-editor" />
      </div>

      {doc.def && doc.def.stages.length > 0 && (
        <section aria-labelledby="graph-title">
          <h2 id="graph-title">Graph</h2>
          <Graph def={doc.def} />
          <p class="muted">
            Green arrows lead where a stage goes when it is done, red when it failed, amber when it is blocked; a dashed arrow is the
            default nobody wrote.
          </p>
        </section>
      )}

      <section aria-labelledby="history-title">
        <h2 id="history-title">History</h2>
        {loaded && loaded.versions.length === 0 && (
          <div class="empty" data-testid="history-empty">
            <p class="what">No version of {name} has been published yet.</p>
            <p class="muted">
              {readOnly
                ? `${name} tickets run on ${loaded.startsFrom || "default"} until someone who may update the project publishes one.`
                : "Edit the stages above (or import a YAML file) and press Publish: its first version appears here, and every later one can be compared with it."}
            </p>
          </div>
        )}
        {loaded && loaded.versions.length > 0 && (
          <table class="history" data-testid="history">
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Author</th>
                <th scope="col">Published</th>
                <th scope="col">
                  <span class="visually-hidden">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {loaded.versions.map((v) => (
                <tr data-version={v.version}>
                  <td>{v.version === 0 ? "0 (template)" : v.version}</td>
                  <td>{v.created_by}</td>
                  <td>{v.created_at ? <time dateTime={v.created_at}>{new Date(v.created_at).toLocaleString()}</time> : "—"}</td>
                  <td>
                    <button type="button" class="secondary" onClick={() => onLoadVersion(v)}>
                      {readOnly ? "Show" : "Load"}
                      <span class="visually-hidden"> version {v.version}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {loaded && loaded.versions.length > 1 && <VersionDiff key={`${name}:${loaded.versions[0].version}`} versions={loaded.versions} render={api.render} />}
      </section>
    </section>
  );
}
