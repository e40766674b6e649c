// The Stages form: the loop limit and the ordered stage list, each field
// marked with the problems whose path leads to it (aria-invalid and the
// message, tied by aria-describedby). Each field's data-testid is the path
// of its value ("stages[1].next.done"), as problems name it.
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import {
  ADAPTERS, DEFAULT_ADAPTER, DEFAULT_MAX_ITERATIONS, defaultTarget, type Definition, KINDS, MAX_MAX_ITERATIONS,
  MAX_TIMEOUT_MINUTES, newStageID, type Outcome, OUTCOMES, parseList, type Problem, SPECIAL_TARGETS, type Stage, withKind,
} from "./model";

interface Props {
  def: Definition;
  problems: Map<string, Problem[]>;
  readOnly: boolean;
  onChange(def: Definition): void;
}

const domID = (k: string) => "f-" + k.replace(/[^a-z0-9]+/gi, "-");

// Problems lists the problems of one form element.
function Problems({ k, problems }: { k: string; problems: Map<string, Problem[]> }) {
  const ps = problems.get(k);
  if (!ps?.length) return null;
  return (
    <ul class="field-problems" id={domID(k) + "-problems"} data-testid={`problems:${k}`}>
      {ps.map((p) => (
        <li>{p.message}</li>
      ))}
    </ul>
  );
}

// attrs are a control's attributes for the value at path k.
function attrs(k: string, problems: Map<string, Problem[]>) {
  const bad = !!problems.get(k)?.length;
  return {
    id: domID(k),
    "data-testid": k,
    "aria-invalid": bad ? ("true" as const) : undefined,
    "aria-describedby": bad ? domID(k) + "-problems" : undefined,
  };
}

function Field(props: { k: string; label: string; problems: Map<string, Problem[]>; hint?: string; children: ComponentChildren; wide?: boolean }) {
  return (
    <div class={props.wide ? "field wide" : "field"}>
      <label for={domID(props.k)}>{props.label}</label>
      {props.children}
      {props.hint && <small>{props.hint}</small>}
      <Problems k={props.k} problems={props.problems} />
    </div>
  );
}

// ReadOnly shows a value to a reader who may not edit it.
function ReadOnly(props: { k: string; label: string; value: string; problems: Map<string, Problem[]> }) {
  return (
    <div class="field">
      <span class="label">{props.label}</span>
      <span class="value" data-testid={props.k}>{props.value || "—"}</span>
      <Problems k={props.k} problems={props.problems} />
    </div>
  );
}

function Select(props: { value: string; options: [string, string][]; a: ReturnType<typeof attrs>; onChange(v: string): void }) {
  const opts = props.options.some(([v]) => v === props.value) ? props.options : [...props.options, [props.value, props.value ? `${props.value} (unknown)` : "(none)"] as [string, string]];
  return (
    <select {...props.a} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
      {opts.map(([v, label]) => (
        <option value={v}>{label}</option>
      ))}
    </select>
  );
}

// num reads a number field as the whole number the API takes (empty: 0, not
// written); far out of range stays out of range, for validation to name.
const num = (v: string) => {
  const n = Math.trunc(Number(v));
  return Number.isFinite(n) ? Math.max(-1e9, Math.min(1e9, n)) : 0;
};

export function StagesForm({ def, problems, readOnly, onChange }: Props) {
  // A renamed stage takes the outcomes leading to it along (not to an
  // empty id: clearing the field to retype it keeps them).
  const set = (i: number, s: Stage) => {
    const from = def.stages[i].id;
    const rename = (t: string | undefined) => (from && s.id && t === from ? s.id : t);
    const stages = def.stages.map((x, j) => (j === i ? s : x));
    onChange({
      ...def,
      stages: from === s.id ? stages : stages.map((x) => (x.next ? { ...x, next: { done: rename(x.next.done), failed: rename(x.next.failed), blocked: rename(x.next.blocked) } } : x)),
    });
  };
  const move = (i: number, by: number) => {
    const stages = [...def.stages];
    [stages[i], stages[i + by]] = [stages[i + by], stages[i]];
    onChange({ ...def, stages });
  };
  const remove = (i: number) => onChange({ ...def, stages: def.stages.filter((_, j) => j !== i) });
  const add = () => onChange({ ...def, stages: [...def.stages, { id: newStageID(def), kind: "agent" }] });

  return (
    <div class="stages-form">
      {readOnly ? (
        <ReadOnly k="max_iterations" label="Loop limit (max_iterations)" value={String(def.max_iterations || `${DEFAULT_MAX_ITERATIONS} (default)`)} problems={problems} />
      ) : (
        <Field k="max_iterations" label="Loop limit (max_iterations)" problems={problems} hint={`1–${MAX_MAX_ITERATIONS}; empty: ${DEFAULT_MAX_ITERATIONS}`}>
          <input
            type="number"
            min={1}
            max={MAX_MAX_ITERATIONS}
            placeholder={String(DEFAULT_MAX_ITERATIONS)}
            {...attrs("max_iterations", problems)}
            value={def.max_iterations ? String(def.max_iterations) : ""}
            onInput={(e) => onChange({ ...def, max_iterations: num(e.currentTarget.value) })}
          />
        </Field>
      )}
      <div data-testid="stages">
        <Problems k="stages" problems={problems} />
      </div>
      <ol class="stage-list">
        {def.stages.map((s, i) => (
          <li>
            <StageFields
              def={def}
              i={i}
              s={s}
              problems={problems}
              readOnly={readOnly}
              onChange={(s) => set(i, s)}
              onMove={(by) => move(i, by)}
              onRemove={() => remove(i)}
            />
          </li>
        ))}
      </ol>
      {!readOnly && (
        <button type="button" onClick={add}>
          Add stage
        </button>
      )}
    </div>
  );
}

interface StageProps {
  def: Definition;
  i: number;
  s: Stage;
  problems: Map<string, Problem[]>;
  readOnly: boolean;
  onChange(s: Stage): void;
  onMove(by: number): void;
  onRemove(): void;
}

function StageFields({ def, i, s, problems, readOnly, onChange, onMove, onRemove }: StageProps) {
  const p = `stages[${i}]`;
  const label = s.id || `stage ${i + 1}`;
  const put = (patch: Partial<Stage>) => onChange({ ...s, ...patch });
  const putNext = (o: Outcome, v: string) => put({ next: { ...s.next, [o]: v } });
  // A field of another kind is shown while it holds a value, so that its
  // problem (field_not_allowed) has a place and the value can be cleared.
  const agent = s.kind === "agent";
  const showAgent = (v: unknown) => agent || (Array.isArray(v) ? v.length > 0 : !!v);
  const stageBad = !!problems.get(p)?.length;

  const targets: [string, string][] = [
    ...def.stages.filter((x, j) => x.id && def.stages.findIndex((y) => y.id === x.id) === j).map((x): [string, string] => [x.id, `stage ${x.id}`]),
    ...SPECIAL_TARGETS.map((t): [string, string] => [t, t]),
  ];
  const text = (k: keyof Stage, lbl: string, hint?: string) =>
    readOnly ? (
      <ReadOnly k={`${p}.${k}`} label={lbl} value={String(s[k] ?? "")} problems={problems} />
    ) : (
      <Field k={`${p}.${k}`} label={lbl} problems={problems} hint={hint}>
        <input type="text" {...attrs(`${p}.${k}`, problems)} value={String(s[k] ?? "")} onInput={(e) => put({ [k]: e.currentTarget.value })} />
      </Field>
    );
  const select = (k: string, lbl: string, value: string, options: [string, string][], on: (v: string) => void) =>
    readOnly ? (
      <ReadOnly k={`${p}.${k}`} label={lbl} value={options.find(([v]) => v === value)?.[1] ?? value} problems={problems} />
    ) : (
      <Field k={`${p}.${k}`} label={lbl} problems={problems}>
        <Select value={value} options={options} a={attrs(`${p}.${k}`, problems)} onChange={on} />
      </Field>
    );

  return (
    <fieldset class={stageBad ? "stage invalid" : "stage"} data-testid={p} aria-describedby={stageBad ? domID(p) + "-problems" : undefined}>
      <legend>
        Stage {i + 1}: {label}
      </legend>
      {!readOnly && (
        <div class="stage-tools">
          <button type="button" class="secondary" disabled={i === 0} onClick={() => onMove(-1)}>
            <span aria-hidden="true">↑ </span>Up<span class="visually-hidden">: move stage {label} up</span>
          </button>
          <button type="button" class="secondary" disabled={i === def.stages.length - 1} onClick={() => onMove(1)}>
            <span aria-hidden="true">↓ </span>Down<span class="visually-hidden">: move stage {label} down</span>
          </button>
          <button type="button" class="secondary" onClick={onRemove}>
            Remove<span class="visually-hidden"> stage {label}</span>
          </button>
        </div>
      )}
      <Problems k={p} problems={problems} />
      <div class="fields">
        {text("id", "ID")}
        {text("name", "Name")}
        {select("kind", "Kind", s.kind, KINDS, (k) => onChange(withKind(s, k)))}
        {showAgent(s.adapter) &&
          select("adapter", "Adapter", s.adapter ?? "", [["", `default (${DEFAULT_ADAPTER})`], ...ADAPTERS.map((a): [string, string] => [a, a])], (v) => put({ adapter: v }))}
        {showAgent(s.model) && text("model", "Model", "empty: the adapter's default")}
        {showAgent(s.skills) && (
          <List k={`${p}.skills`} label="Skills" hint="comma-separated; empty: every project skill" none="every project skill" values={s.skills ?? []} problems={problems} readOnly={readOnly} onChange={(skills) => put({ skills })} />
        )}
        {showAgent(s.knowledge) && (
          <List k={`${p}.knowledge`} label="Knowledge" hint="entries for the prompt, comma-separated: slug or space:slug" none="none" values={s.knowledge ?? []} problems={problems} readOnly={readOnly} onChange={(knowledge) => put({ knowledge })} />
        )}
        {showAgent(s.timeout_minutes) &&
          (readOnly ? (
            <ReadOnly k={`${p}.timeout_minutes`} label="Timeout (minutes)" value={s.timeout_minutes ? String(s.timeout_minutes) : "120 (default)"} problems={problems} />
          ) : (
            <Field k={`${p}.timeout_minutes`} label="Timeout (minutes)" problems={problems} hint={`1–${MAX_TIMEOUT_MINUTES}; empty: two hours`}>
              <input
                type="number"
                min={0}
                max={MAX_TIMEOUT_MINUTES}
                placeholder="120"
                {...attrs(`${p}.timeout_minutes`, problems)}
                value={s.timeout_minutes ? String(s.timeout_minutes) : ""}
                onInput={(e) => put({ timeout_minutes: num(e.currentTarget.value) })}
              />
            </Field>
          ))}
        {(s.kind === "platform" || s.action) && select("action", "Action", s.action ?? "", [["", "(none)"], ["merge", "merge"]], (v) => put({ action: v }))}
        {showAgent(s.instructions) &&
          (readOnly ? (
            <div class="field wide">
              <span class="label">Instructions</span>
              <pre class="value" data-testid={`${p}.instructions`}>{s.instructions || "—"}</pre>
              <Problems k={`${p}.instructions`} problems={problems} />
            </div>
          ) : (
            <Field k={`${p}.instructions`} label="Instructions" problems={problems} wide>
              <textarea rows={4} {...attrs(`${p}.instructions`, problems)} value={s.instructions ?? ""} onInput={(e) => put({ instructions: e.currentTarget.value })} />
            </Field>
          ))}
      </div>
      <div class="fields outcomes" role="group" aria-label={`Where the outcomes of ${label} lead`}>
        {OUTCOMES.map((o) =>
          select(`next.${o}`, `${o} leads to`, s.next?.[o] ?? "", [["", `default (${defaultTarget(def, i, o)})`], ...targets], (v) => putNext(o, v)),
        )}
      </div>
    </fieldset>
  );
}

// List keeps the text being typed ("go, ") apart from the list it stands
// for, and takes the list again when it changes elsewhere (the YAML tab).
function List(props: {
  k: string;
  label: string;
  hint: string;
  none: string;
  values: string[];
  problems: Map<string, Problem[]>;
  readOnly: boolean;
  onChange(v: string[]): void;
}) {
  const [text, setText] = useState(props.values.join(", "));
  useEffect(() => {
    if (parseList(text).join("\n") !== props.values.join("\n")) setText(props.values.join(", "));
  }, [props.values.join("\n")]);
  if (props.readOnly) return <ReadOnly k={props.k} label={props.label} value={props.values.join(", ") || props.none} problems={props.problems} />;
  return (
    <Field k={props.k} label={props.label} problems={props.problems} hint={props.hint}>
      <input
        type="text"
        {...attrs(props.k, props.problems)}
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value);
          props.onChange(parseList(e.currentTarget.value));
        }}
      />
    </Field>
  );
}
