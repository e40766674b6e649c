// Runners (platform admins): each registered runner with its labels, its
// liveness (Core's reading of its heartbeats), the runs it holds now and
// whether it drains. A platform admin drains a runner to take it out of
// service without cutting work short — it leases no new run, the runs it
// holds finish — and undrains it to put it back; both ask first.
import { useEffect, useState } from "preact/hooks";
import { enc, get, type Run, type Runner } from "../api";
import { useAction, useLoad } from "../load";
import { useSession } from "../session";
import { Ago, Alert, Badge, useConfirm } from "../ui";
import "./admin.css";
import { runners as api } from "./api";

// refreshMs is how often the list is read again while the tab is visible:
// losing a heartbeat is no event, so a runner that stops turns silent
// without a reload.
const refreshMs = 5000;

export default function Page() {
  const session = useSession();
  const admin = session?.platform_admin ?? false;
  const { data, error, setData } = useLoad(() => (admin ? api.list() : Promise.resolve([])), [admin]);
  useEffect(() => {
    if (!admin) return;
    let stopped = false;
    const refresh = () => {
      if (document.visibilityState !== "visible") return;
      api.list().then(
        (list) => stopped || setData(list),
        () => {}, // a failed read keeps the last list; the next one tries again
      );
    };
    const timer = window.setInterval(refresh, refreshMs);
    document.addEventListener("visibilitychange", refresh);
    return () => {
      stopped = true;
      clearInterval(timer);
      document.removeEventListener("visibilitychange", refresh);
    };
  }, [admin]);
  const [run, busy, actionError] = useAction();
  const [confirm, dialog] = useConfirm();
  const [done, setDone] = useState("");

  const toggle = async (r: Runner) => {
    const drain = !r.drained;
    const held = r.sessions?.length ?? 0;
    const ok = await confirm(
      drain
        ? {
            title: `Drain ${r.name}?`,
            body:
              `${r.name} will lease no new run until it is undrained. ` +
              (held ? `The ${held === 1 ? "run" : `${held} runs`} it holds now finish${held === 1 ? "es" : ""} as usual.` : "It runs nothing now."),
            confirm: "Drain runner",
            keep: "Keep it leasing",
            danger: true,
          }
        : {
            title: `Undrain ${r.name}?`,
            body: `${r.name} leases runs again as soon as it asks for one.`,
            confirm: "Undrain runner",
            keep: "Keep it drained",
          },
    );
    if (!ok) return;
    setDone("");
    const changed = await run(async () => {
      const n = drain ? await api.drain(r.id) : await api.undrain(r.id);
      setData((data ?? []).map((x) => (x.id === n.id ? n : x)));
    });
    if (changed) setDone(drain ? `${r.name} is drained: it takes no new run.` : `${r.name} is back in service.`);
  };

  return (
    <section class="admin runners">
      <h1>Runners</h1>
      {!admin && <p class="notice">Only platform admins see and drain the runners.</p>}
      <Alert error={error} />
      <Alert error={actionError} />
      {done && (
        <p role="status" data-testid="runner-status">
          {done}
        </p>
      )}
      {dialog}
      {data && !data.length && admin && (
        <p class="muted">No runner has registered. Start one with `ballet runner` and a runner token (docs/runners.md).</p>
      )}
      {data && data.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Runs</th>
                <th scope="col">Labels</th>
                <th scope="col">Adapters</th>
                <th scope="col">Last heartbeat</th>
                <th scope="col">Service</th>
              </tr>
            </thead>
            <tbody>
              {data.map((r) => (
                <tr key={r.id} data-testid="runner" data-name={r.name} data-drained={r.drained ? "1" : "0"} data-nav>
                  <td>
                    {r.name}
                    {r.version && <span class="muted"> {r.version}</span>}
                  </td>
                  <td>
                    {r.alive ? "alive" : <Badge kind="attention">silent</Badge>}
                    {r.drained && (
                      <>
                        {" "}
                        <Badge kind="pause">drained</Badge>
                        {r.drained_at && (
                          <span class="muted">
                            {" "}
                            <Ago at={r.drained_at} />
                            {r.drained_by && <> by {r.drained_by}</>}
                          </span>
                        )}
                      </>
                    )}
                    {r.draining && <> · stopping</>}
                    {r.problem && <> · {r.problem}</>}
                  </td>
                  <td>
                    <Sessions ids={r.sessions ?? []} capacity={r.capacity} />
                  </td>
                  <td>
                    {Object.entries(r.labels ?? {})
                      .map(([k, v]) => `${k}=${v}`)
                      .join(", ") || "—"}
                  </td>
                  <td>{(r.adapters ?? []).map((a) => (a.version ? `${a.name} ${a.version}` : a.name)).join(", ") || "—"}</td>
                  <td>
                    <Ago at={r.last_seen_at} />
                  </td>
                  <td>
                    <button
                      type="button"
                      class={r.drained ? "" : "danger"}
                      data-open
                      disabled={busy}
                      aria-label={`${r.drained ? "Undrain" : "Drain"} ${r.name}`}
                      onClick={() => void toggle(r)}
                    >
                      {r.drained ? "Undrain" : "Drain"}
                    </button>
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

// runsSeen keeps the runs already read (id → run): a runner's sessions are
// run ids, and the list is read again every few seconds.
const runsSeen = new Map<string, Run & { item?: string }>();

// Sessions lists the runs a runner holds, each linked to its ticket.
function Sessions({ ids, capacity }: { ids: string[]; capacity: number }) {
  const [, setTick] = useState(0);
  useEffect(() => {
    const missing = ids.filter((id) => !runsSeen.has(id));
    if (!missing.length) return;
    let stopped = false;
    Promise.all(
      missing.map((id) =>
        get<Run & { item?: string }>(`/api/v1/runs/${enc(id)}`).then(
          (r) => runsSeen.set(id, r),
          () => {}, // shown by id
        ),
      ),
    ).then(() => stopped || setTick((n) => n + 1));
    return () => {
      stopped = true;
    };
  }, [ids.join(",")]);
  return (
    <>
      <span data-testid="runner-load">
        {ids.length} of {capacity}
      </span>
      {ids.length > 0 && (
        <ul class="plain">
          {ids.map((id) => {
            const r = runsSeen.get(id);
            return (
              <li key={id}>
                {r?.item ? (
                  <a href={`/items/${enc(r.item)}`}>
                    {r.item} · {r.stage}
                  </a>
                ) : (
                  <code>{id.slice(0, 8)}</code>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </>
  );
}
