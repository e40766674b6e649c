// A ticket's runs: each run's model, tokens and cost, the ticket's totals,
// and the selected run's session as a conversation (its transcript, parsed
// by Core) with the raw log one click away. Stage reports are agent
// output, untrusted: they render as sanitised Markdown (Report).
import { Component } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { tickets, type Amount, type Run, type Transcript, type TranscriptEntry } from "../api";
import { markdown } from "../knowledge/render";
import { Alert, duration, usd } from "../ui";

// Report renders a stage report (agent output) as sanitised Markdown.
// The HTML is made once per text: the ticket page renders again on every
// load and live event.
export function Report({ src, label }: { src: string; label: string }) {
  const html = useMemo(() => ({ __html: markdown(src) }), [src]);
  return <div class="report kn-markdown" role="region" aria-label={label} data-testid="report" dangerouslySetInnerHTML={html} />;
}

const tokens = (n: number) => n.toLocaleString("en");

export function Runs({ item, runs }: { item: string; runs: Run[] }) {
  const [selected, setSelected] = useState(() => (location.hash.startsWith("#run-") ? location.hash.slice(5) : ""));
  const [total, setTotal] = useState<Amount | null>(null);
  useEffect(() => {
    const l = () => setSelected(location.hash.startsWith("#run-") ? location.hash.slice(5) : "");
    addEventListener("hashchange", l);
    return () => removeEventListener("hashchange", l);
  }, []);
  useEffect(() => {
    let stop = false;
    tickets.budget(item).then(
      (b) => !stop && setTotal(b),
      () => !stop && setTotal(null),
    );
    return () => {
      stop = true;
    };
  }, [item, runs]);
  const choose = (id: string) => (e: Event) => {
    e.preventDefault();
    e.stopPropagation();
    history.replaceState(null, "", `#run-${id}`);
    setSelected(id);
  };
  const run = runs.find((r) => r.id === selected);
  return (
    <section id="runs" aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      {total && runs.length > 0 && (
        <p data-testid="ticket-usage">
          This ticket so far: {total.runs} run{total.runs === 1 ? "" : "s"}, {tokens(total.input_tokens)} tokens in / {tokens(total.output_tokens)} out,{" "}
          {usd(total.spent_usd)}
        </p>
      )}
      {!runs.length ? (
        <p class="muted">No runs yet.</p>
      ) : (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Stage</th>
                <th scope="col">Adapter</th>
                <th scope="col">Model</th>
                <th scope="col">Status</th>
                <th scope="col">Tokens in / out</th>
                <th scope="col">Cost</th>
                <th scope="col">Duration</th>
                <th scope="col">Session</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr key={r.id} data-testid="run" data-run={r.id} class={r.id === selected ? "current" : ""}>
                  <td>
                    {r.stage} <span class="muted">#{r.iteration}</span>
                  </td>
                  <td>{r.adapter}</td>
                  <td data-testid="run-model">{r.model || <span class="muted">adapter default</span>}</td>
                  <td data-testid="run-status" data-status={r.status}>
                    {runStatus(r)}
                  </td>
                  <td>
                    {tokens(r.usage.input_tokens)} / {tokens(r.usage.output_tokens)}
                  </td>
                  <td>{usd(r.usage.cost_usd)}</td>
                  <td>{duration(r.started_at, r.finished_at)}</td>
                  <td>
                    <a href={`#run-${r.id}`} onClick={choose(r.id)} aria-label={`Session of the ${r.stage} run ${r.id}`}>
                      Session
                    </a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {run && <Session run={run} />}
    </section>
  );
}

// Session shows a run: its error and report, its transcript, and its raw
// log on request.
function Session({ run }: { run: Run }) {
  const [raw, setRaw] = useState(false);
  return (
    <section class="session" aria-label={`Session of run ${run.id}`}>
      <h3>
        {run.stage} (run {run.id}) · {run.model || "adapter default"}
      </h3>
      {run.error && <p class="text">Error: {run.error}</p>}
      {run.report && <Report src={run.report} label={`Report of run ${run.id}`} />}
      <p>
        <button type="button" class="secondary" aria-pressed={raw} data-testid="raw-log" onClick={() => setRaw(!raw)}>
          {raw ? "Show the conversation" : "Show the raw log"}
        </button>
      </p>
      {raw ? <RunLog run={run} /> : <Conversation run={run} />}
    </section>
  );
}

// early holds a transcript read started before the ticket's runs were
// read (prefetchTranscript), for the Conversation that shows it first.
let early: { run: string; at: number; read: Promise<Transcript> } | null = null;

// prefetchTranscript starts reading run's transcript at once, beside the
// ticket's own reads (the address names the run: #run-ID); the run's
// Conversation takes it within 10 s, else reads afresh.
export function prefetchTranscript(run: string) {
  const read = tickets.transcript(run);
  read.catch(() => undefined); // its error is the Conversation's
  early = { run, at: Date.now(), read };
}

// takeTranscript is the prefetched read of run's transcript, once.
function takeTranscript(run: string): Promise<Transcript> | null {
  const e = early;
  if (!e || e.run !== run) return null;
  early = null;
  return Date.now() - e.at < 10_000 ? e.read : null;
}

// Conversation reads the run's transcript, again every 2 s while the run
// goes on.
function Conversation({ run }: { run: Run }) {
  const [t, setT] = useState<Transcript | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    let stop = false;
    let timer: number | undefined;
    setT(null);
    setError("");
    let first = takeTranscript(run.id);
    const read = async () => {
      try {
        const got = await (first ?? tickets.transcript(run.id));
        first = null;
        if (stop) return;
        setT(got);
        if (!got.finished) timer = window.setTimeout(read, 2000);
      } catch (e) {
        if (!stop) setError((e as Error).message);
      }
    };
    void read();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [run.id]);
  return (
    <div class="transcript">
      <Alert error={error} />
      {t && !t.entries.length && <p class="muted">{t.finished ? "The session printed nothing Ballet can read." : "Waiting for the session…"}</p>}
      {t && (
<Entries entries={t.entries} />
      )}
      {t?.truncated && <p class="muted">The transcript stops here: the session went on beyond what a transcript shows (see the raw log).</p>}
      {t?.log_truncated && <p class="muted">The log reached its limit: what the session printed after it was not kept.</p>}
    </div>
  );
}

// One formatter for every entry's time (toLocaleTimeString builds one a
// call: 500 entries paid for 500).
const timeFormat = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
// Entries is the conversation's list, compared again only when a new
// transcript is read (not on each of the ticket page's renders: 500
// entries are 2,500 elements).
class Entries extends Component<{ entries: TranscriptEntry[] }> {
  shouldComponentUpdate(next: { entries: TranscriptEntry[] }) {
    return next.entries !== this.props.entries;
  }
  render() {
    return (
      <ol class="conversation" aria-label="Conversation" data-testid="transcript">
        {this.props.entries.map((e, i) => (
          <EntryView key={i} e={e} />
        ))}
      </ol>
    );
  }
}

const clock = (at: string | null) => (at ? timeFormat.format(new Date(at)) : "");

function EntryView({ e }: { e: TranscriptEntry }) {
  const time = e.time && <time dateTime={e.time}>{clock(e.time)}</time>;
  switch (e.kind) {
    case "text":
      return (
        <li class={e.is_error ? "entry text error" : "entry text"} data-kind="text">
          {time} <p class="text">{e.text}</p>
        </li>
      );
    case "tool_call":
      return (
        <li class="entry tool" data-kind="tool_call">
          <details>
            <summary>
              {time} <code>{e.tool}</code>
            </summary>
            <pre>{pretty(e.input ?? "")}</pre>
          </details>
        </li>
      );
    case "tool_result":
      return (
        <li class={e.is_error ? "entry result error" : "entry result"} data-kind="tool_result">
          <details>
            <summary>
              {time} {e.is_error ? "failed" : "result"} of <code>{e.tool || e.id}</code>
            </summary>
            <pre>{e.text}</pre>
          </details>
        </li>
      );
    case "question":
      return (
        <li class="entry question" data-kind="question">
          {time} <strong>{e.blocking ? "Asked (blocking)" : "Asked"}:</strong> <span class="text">{e.text}</span>
        </li>
      );
    case "report":
      return (
        <li class="entry report" data-kind="report">
          {time} <strong>Reported {e.outcome}</strong>
          <Report src={e.text ?? ""} label="Submitted report" />
        </li>
      );
    case "usage":
      return (
        <li class="entry usage muted" data-kind="usage">
          {time} {e.model ? `${e.model}: ` : ""}
          {e.usage ? `${tokens(e.usage.input_tokens)} tokens in, ${tokens(e.usage.output_tokens)} out, ${usd(e.usage.cost_usd)}` : ""}
        </li>
      );
  }
  return null;
}

// pretty indents a tool call's JSON input; a cut one stays as it came.
function pretty(input: string): string {
  try {
    return JSON.stringify(JSON.parse(input), null, 2);
  } catch {
    return input;
  }
}

// RunLog reads a run's raw log from offset 0 and keeps reading while the run goes on.
function RunLog({ run }: { run: Run }) {
  const [text, setText] = useState("");
  const [state, setState] = useState({ truncated: false, finished: false });
  const [error, setError] = useState("");
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    let offset = 0;
    let stop = false;
    let timer: number | undefined;
    setText("");
    setError("");
    const read = async () => {
      try {
        const c = await tickets.log(run.id, offset);
        if (stop) return;
        const grew = c.next_offset > offset;
        offset = c.next_offset;
        if (c.data) setText((t) => t + c.data);
        setState({ truncated: c.truncated, finished: c.finished });
        if (grew) timer = window.setTimeout(read, 0); // more may be waiting (1 MiB per read)
        else if (!c.finished) timer = window.setTimeout(read, 1000);
      } catch (e) {
        if (!stop) setError((e as Error).message);
      }
    };
    void read();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [run.id]);
  useEffect(() => {
    const p = pre.current;
    if (p) p.scrollTop = p.scrollHeight;
  }, [text]);
  return (
    <section class="log" aria-label={`Log of run ${run.id}`}>
      <h4>Raw log {state.finished ? "" : <span class="muted">· live</span>}</h4>
      <Alert error={error} />
      <pre ref={pre} tabIndex={0} data-testid="run-log">
        {text || (state.finished ? "(empty)" : "waiting for output…")}
      </pre>
      {state.truncated && <p class="muted">The log reached its limit: what followed was dropped.</p>}
    </section>
  );
}

// runStatus is how a run's status reads: an interrupted run (a restart, a
// lost runner, a drain, the kill switch) is no failure of the agent, and
// says what interrupted it; its stage runs again by itself.
export function runStatus(r: Pick<Run, "status" | "outcome" | "reason">): string {
  if (r.status === "interrupted") return `interrupted${r.reason ? ` (${r.reason.replaceAll("_", " ")})` : ""}: runs again`;
  return r.status + (r.outcome ? ` (${r.outcome})` : "");
}
