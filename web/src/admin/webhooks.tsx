// Webhooks of an organization or a project: create (the signing secret is
// shown once), list with their failing state and last error, deliveries
// with redelivery, re-enable, delete (asked first).
import { useState } from "preact/hooks";
import { useLoad } from "../load";
import { Ago, Alert, Badge, useConfirm } from "../ui";
import { causeNames, causes, webhooks, type CreatedWebhook, type Webhook } from "./api";
import { Field, FormError, Secret, useForm, value } from "./forms";

export function Webhooks({ base, scope }: { base: string; scope: string }) {
  const api = webhooks(base);
  const { data, error, reload } = useLoad(api.list, [base]);
  const [created, setCreated] = useState<CreatedWebhook | null>(null);
  const [open, setOpen] = useState("");
  const [confirm, dialog] = useConfirm();
  const rowForm = useForm([]);
  const remove = async (h: Webhook) => {
    const ok = await confirm({
      title: `Delete the webhook to ${h.url}?`,
      body: "It stops receiving messages at once, and its deliveries are deleted with it.",
      confirm: "Delete webhook",
      keep: "Keep it",
      danger: true,
    });
    if (ok && (await rowForm.submit(() => api.remove(h.id)))) await reload();
  };
  const enable = async (h: Webhook) => {
    if (await rowForm.submit(() => api.update(h.id, { active: true }))) await reload();
  };
  return (
    <section aria-labelledby={`${base}-hooks-h`} class="admin">
      <h2 id={`${base}-hooks-h`}>Webhooks</h2>
      <p class="muted">
        Ballet posts {scope}'s notifications to these addresses, signed with each hook's secret (docs/notifications.md).
      </p>
      <Alert error={error} />
      {created && (
        <Secret label={`The signing secret of ${created.url}`} secret={created.secret} onDone={() => setCreated(null)} />
      )}
      {data && !data.length && <p class="muted">No webhooks yet: add one below to hear about {scope} in chat or another tool.</p>}
      {data?.map((h) => (
        <article key={h.id} class="card" data-testid="webhook" aria-label={`Webhook to ${h.url}`}>
          <p class="row">
            <strong class="text">{h.url}</strong>
            {!h.active ? <Badge kind="attention">disabled</Badge> : h.failing ? <Badge kind="attention">failing</Badge> : <Badge kind="done">ok</Badge>}
          </p>
          <p class="muted">
            {h.format} · {h.events.includes("*") ? "every cause" : h.events.join(", ")} · created by {h.created_by} <Ago at={h.created_at} />
          </p>
          {h.failing && (
            <p class="alert" data-testid="webhook-error">
              Failing since <Ago at={h.failing_since} />: {h.last_error ?? "no answer"}
            </p>
          )}
          {!h.active && h.disabled_at && (
            <p class="notice">
              Disabled <Ago at={h.disabled_at} /> after failing for too long{h.last_error ? `: ${h.last_error}` : ""}.
            </p>
          )}
          <div class="actions">
            <button type="button" class="secondary" aria-expanded={open === h.id} onClick={() => setOpen(open === h.id ? "" : h.id)}>
              {open === h.id ? "Hide deliveries" : "Deliveries"}
            </button>
            {!h.active && (
              <button type="button" disabled={rowForm.busy} onClick={() => void enable(h)}>
                Enable again
              </button>
            )}
            <button type="button" class="danger" disabled={rowForm.busy} onClick={() => void remove(h)}>
              Delete
            </button>
          </div>
          {open === h.id && <Deliveries base={base} hook={h} />}
        </article>
      ))}
      <FormError form={rowForm} />
      <NewWebhook
        base={base}
        onCreated={async (h) => {
          setCreated(h);
          await reload();
        }}
      />
      {dialog}
    </section>
  );
}

function Deliveries({ base, hook }: { base: string; hook: Webhook }) {
  const api = webhooks(base);
  const { data, error, reload } = useLoad(() => api.deliveries(hook.id), [hook.id]);
  const form = useForm([]);
  const [sent, setSent] = useState("");
  const redeliver = async (id: string) => {
    setSent("");
    if (await form.submit(() => api.redeliver(hook.id, id))) {
      setSent("Sent again: it is retried for the next 24 hours until it succeeds.");
      await reload();
    }
  };
  return (
    <section aria-label={`Deliveries to ${hook.url}`}>
      <Alert error={error} />
      <FormError form={form} />
      {sent && <p role="status">{sent}</p>}
      {data && !data.deliveries.length && <p class="muted">Nothing was sent to it yet.</p>}
      {data && data.deliveries.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Cause</th>
                <th scope="col">Ticket</th>
                <th scope="col">Status</th>
                <th scope="col">Answer</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last attempt</th>
                <th scope="col">Redeliver</th>
              </tr>
            </thead>
            <tbody>
              {data.deliveries.map((d) => (
                <tr key={d.id} data-testid="delivery">
                  <td>{d.cause}</td>
                  <td>
                    <a href={`/items/${encodeURIComponent(d.item)}`}>{d.item}</a>
                  </td>
                  <td>{d.status}</td>
                  <td>
                    {d.http_status ?? "—"}
                    {d.error && <span class="text"> · {d.error}</span>}
                  </td>
                  <td>{d.attempts}</td>
                  <td>
                    <Ago at={d.last_attempt_at} />
                  </td>
                  <td>
                    {d.status !== "pending" && (
                      <button type="button" class="secondary" disabled={form.busy} onClick={() => void redeliver(d.id)}>
                        Redeliver
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function NewWebhook({ base, onCreated }: { base: string; onCreated: (h: CreatedWebhook) => Promise<void> }) {
  const form = useForm(["url", "events", "format"]);
  const [url, setUrl] = useState("");
  const [all, setAll] = useState(true);
  const [events, setEvents] = useState<string[]>([]);
  const [format, setFormat] = useState("standard");
  const submit = async (e: Event) => {
    e.preventDefault();
    let made: CreatedWebhook | null = null;
    const ok = await form.submit(async () => {
      made = await webhooks(base).create({ url: url.trim(), events: all ? ["*"] : events, format });
    });
    if (ok && made) {
      setUrl("");
      setEvents([]);
      setAll(true);
      await onCreated(made);
    }
  };
  const toggle = (c: string, on: boolean) => setEvents(on ? [...events, c] : events.filter((x) => x !== c));
  return (
    <form onSubmit={submit} aria-label="Add a webhook">
      <h3>Add a webhook</h3>
      <FormError form={form} />
      <Field form={form} name="url" label="URL" hint="Where Ballet posts each message.">
        {(a) => <input {...a} type="url" required value={url} onInput={(e) => setUrl(value(e))} />}
      </Field>
      <Field form={form} name="format" label="Format">
        {(a) => (
          <select {...a} value={format} onChange={(e) => setFormat(value(e))}>
            <option value="standard">standard: signed JSON (Standard Webhooks)</option>
            <option value="slack">slack: a Slack or Mattermost incoming webhook</option>
          </select>
        )}
      </Field>
      <fieldset aria-describedby={form.fieldError("events") ? `${form.id}-events-error` : undefined}>
        <legend>Events</legend>
        <label class="check">
          <input type="checkbox" checked={all} onChange={(e) => setAll((e.currentTarget as HTMLInputElement).checked)} />
          Every cause, including ones added later
        </label>
        {!all && (
          <div class="checks">
            {causes.map((c) => (
              <label key={c} class="check">
                <input type="checkbox" checked={events.includes(c)} onChange={(e) => toggle(c, (e.currentTarget as HTMLInputElement).checked)} />
                {c} <span class="muted">({causeNames[c]})</span>
              </label>
            ))}
          </div>
        )}
        {form.fieldError("events") && (
          <span class="field-error" id={`${form.id}-events-error`}>
            {form.fieldError("events")}
          </span>
        )}
      </fieldset>
      <button type="submit" disabled={form.busy}>
        Add webhook
      </button>
    </form>
  );
}
