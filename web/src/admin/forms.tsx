// Forms of the administration pages: one write at a time, the API's
// message above the form and each field problem next to its field (the
// API names it: "slug", "repository.url", "causes.flow.failed").
import type { ComponentChildren, JSX } from "preact";
import { useCallback, useState } from "preact/hooks";
import { ApiError } from "../api";
import { message } from "../load";
import "./admin.css";

export interface FormState {
  busy: boolean;
  // error is the message for the whole form ("" when none): the API's
  // message, plus the problems of fields this form does not show.
  error: string;
  // fieldError is the problem the API reported on one field ("" when none).
  fieldError: (field: string) => string;
  // submit runs a write; true when it succeeded.
  submit: (fn: () => Promise<unknown>) => Promise<boolean>;
  clear: () => void;
  id: string; // the prefix of its elements' ids
}

let forms = 0;

// useForm keeps a form's state; fields are the API field names it shows.
export function useForm(fields: string[]): FormState {
  const [id] = useState(() => `f${++forms}`);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(null);
  const submit = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setErr(null);
    try {
      await fn();
      return true;
    } catch (e) {
      setErr(e);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  const known = (f?: string) => !!f && fields.includes(f);
  let error = "";
  const byField = new Map<string, string>();
  if (err instanceof ApiError) {
    const rest: string[] = [];
    for (const d of err.details) {
      const f = d.field ?? d.path;
      if (known(f)) byField.set(f!, byField.has(f!) ? `${byField.get(f!)}; ${d.message}` : d.message);
      else rest.push((f ? `${f}: ` : "") + d.message);
    }
    error = rest.length ? `${err.message}: ${rest.join("; ")}` : err.message;
  } else if (err) error = message(err);
  return { busy, error, fieldError: (f) => byField.get(f) ?? "", submit, clear: () => setErr(null), id };
}

// FieldAttrs are what a Field's control carries: its id (the label's
// target), the API's field name, and its problem as described and invalid.
export interface FieldAttrs {
  id: string;
  name: string;
  "aria-invalid"?: boolean;
  "aria-describedby"?: string;
}

// Field is a labelled control with its problem under it. The control gets
// the ids and ARIA attributes through children(attrs).
export function Field({
  form,
  name,
  label,
  hint,
  children,
}: {
  form: FormState;
  name: string;
  label: ComponentChildren;
  hint?: ComponentChildren;
  children: (attrs: FieldAttrs) => JSX.Element;
}) {
  const base = `${form.id}-${name.replace(/[^a-zA-Z0-9_-]/g, "-")}`;
  const problem = form.fieldError(name);
  const described = [hint ? base + "-hint" : "", problem ? base + "-error" : ""].filter(Boolean).join(" ");
  return (
    <div class={"field" + (problem ? " invalid" : "")}>
      <label for={base}>{label}</label>
      {children({ id: base, name, "aria-invalid": problem ? true : undefined, "aria-describedby": described || undefined })}
      {hint && (
        <span class="hint" id={base + "-hint"}>
          {hint}
        </span>
      )}
      {problem && (
        <span class="field-error" id={base + "-error"} data-field={name}>
          {problem}
        </span>
      )}
    </div>
  );
}

// FormError is the form's own error (role="alert").
export function FormError({ form }: { form: FormState }) {
  if (!form.error) return null;
  return (
    <p role="alert" class="alert">
      {form.error}
    </p>
  );
}

// value reads an input's value from its event.
export const value = (e: Event) => (e.currentTarget as HTMLInputElement).value;

// Secret shows a secret the API returns once, with a button that copies
// it and a warning that it will not be shown again.
export function Secret({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied.");
    } catch {
      // Without clipboard access (a plain-http address) the text stays selectable.
      const el = document.getElementById("secret-value");
      if (el) getSelection()?.selectAllChildren(el);
      setCopied("Select the text and copy it.");
    }
  };
  return (
    <section class="secret" aria-labelledby="secret-h" data-testid="secret">
      <h3 id="secret-h">{label}</h3>
      <p>Copy it now: Ballet keeps only its hash and will not show it again.</p>
      <p>
        <code id="secret-value" data-testid="secret-value">
          {secret}
        </code>
      </p>
      <p class="actions">
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Done
        </button>
        <span role="status">{copied}</span>
      </p>
    </section>
  );
}
