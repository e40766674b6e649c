// Platform: the kill switch, the platform's concurrency limit, a count of
// the runners (their own page: /runners) and whether mail is failing. Platform admins change them; others see the switches only.
import { useEffect, useState } from "preact/hooks";
import { get, patch, setKillSwitch, type MailAttention, type Platform, type Runner } from "../api";
import { useAction, useLoad } from "../load";
import { useSession } from "../session";
import { Ago, Alert, Badge, useConfirm } from "../ui";

export default function Page() {
  const session = useSession();
  const admin = session?.platform_admin ?? false;
  const { data, error, setData } = useLoad(async () => {
    const [platform, runners] = await Promise.all([
      get<Platform>("/api/v1/platform"),
      admin ? get<{ runners: Runner[] }>("/api/v1/runners").then((r) => r.runners) : Promise.resolve(null),
    ]);
    return { platform, runners };
  }, [admin]);
  const [limit, setLimit] = useState("");
  const [saved, setSaved] = useState(false);
  const [run, busy, actionError] = useAction();
  useEffect(() => {
    if (data) setLimit(String(data.platform.concurrency_limit));
  }, [data?.platform.version]);

  const pl = data?.platform;
  const [confirm, dialog] = useConfirm();
  // Either way the switch acts on every organization at once: asked first.
  const kill = async (on: boolean) => {
    const ok = await confirm(
      on
        ? {
            title: "Pull the kill switch?",
            body: "Every running agent session on the platform is stopped and no stage starts anywhere until the switch is released.",
            confirm: "Pull the kill switch",
            keep: "Keep work running",
            danger: true,
          }
        : {
            title: "Release the kill switch?",
            body: "Work runs again everywhere: waiting stages start as runners lease them.",
            confirm: "Release the kill switch",
            keep: "Keep it pulled",
          },
    );
    if (ok) await run(async () => setData({ ...data!, platform: await setKillSwitch(on) }));
  };
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(
      await run(async () =>
        setData({ ...data!, platform: await patch<Platform>("/api/v1/platform", { version: pl!.version, concurrency_limit: Number(limit) }) }),
      ),
    );
  };

  return (
    <section class="platform">
      <h1>Platform</h1>
      <Alert error={error} />
      {pl && (
        <>
          <section aria-labelledby="kill-h">
            <h2 id="kill-h">Kill switch</h2>
            <p data-testid="kill-switch">
              {pl.paused ? (
                <>
                  <Badge kind="pause">Pulled</Badge> every agent session is stopped and no stage starts anywhere.
                </>
              ) : (
                "Released: work runs."
              )}
            </p>
            {admin &&
              (pl.paused ? (
                <button type="button" disabled={busy} onClick={() => kill(false)}>
                  Release the kill switch
                </button>
              ) : (
                <button type="button" class="danger" disabled={busy} onClick={() => kill(true)}>
                  Pull the kill switch
                </button>
              ))}
          </section>
          <section aria-labelledby="limit-h">
            <h2 id="limit-h">Concurrency</h2>
            {admin ? (
              <form onSubmit={save}>
                <label>
                  Running flows at once on the platform (0: no limit)
                  <input
                    type="number"
                    min={0}
                    value={limit}
                    onInput={(e) => {
                      setSaved(false);
                      setLimit((e.target as HTMLInputElement).value);
                    }}
                  />
                </label>
                <button type="submit" disabled={busy}>
                  Save limit
                </button>
                {saved && <p role="status">Saved.</p>}
              </form>
            ) : (
              <p>{pl.concurrency_limit ? `${pl.concurrency_limit} running flows at once` : "No platform limit."}</p>
            )}
          </section>
        </>
      )}
      <Alert error={actionError} />
      {dialog}
      {data?.runners && <RunnersSummary runners={data.runners} />}
      {admin && <Mail />}
    </section>
  );
}

// Mail is the platform's mail deliveries (platform admins): whether mail
// is failing now, and the latest failure — where a needs-me "Mail failing"
// entry leads.
function Mail() {
  const { data, error } = useLoad(() => get<MailAttention>("/api/v1/platform/mail"), []);
  return (
    <section aria-labelledby="mail-h" id="mail">
      <h2 id="mail-h">Mail</h2>
      <Alert error={error} />
      {data && (
        <p data-testid="mail-status" data-failing={data.failing ? "1" : "0"}>
          {data.failing ? <Badge kind="attention">failing</Badge> : "delivering"} · {data.sent} sent, {data.pending} pending,{" "}
          {data.retrying} being retried, {data.failed} given up
        </p>
      )}
      {data?.last_error && (
        <p class="detail">
          Latest failure{data.last_error_at && <> (<Ago at={data.last_error_at} />)</>}: {data.last_error}
        </p>
      )}
    </section>
  );
}

// RunnersSummary counts the runners and links to their page, where they
// are drained.
function RunnersSummary({ runners }: { runners: Runner[] }) {
  const alive = runners.filter((r) => r.alive).length;
  const drained = runners.filter((r) => r.drained).length;
  return (
    <section aria-labelledby="runners-h">
      <h2 id="runners-h">Runners</h2>
      <p data-testid="runners-summary">
        {runners.length ? `${runners.length} registered, ${alive} alive${drained ? `, ${drained} drained` : ""}. ` : "No runner has registered. "}
        <a href="/runners">See and drain the runners</a>
      </p>
    </section>
  );
}
