// A person's notification settings: the address mail goes to (and whether
// it is confirmed), each cause's choice (mail at once, inbox only, off),
// the digest and its hour, and the time zone.
import { useEffect, useState } from "preact/hooks";
import { useLoad } from "../load";
import { Alert, Badge } from "../ui";
import { causeNames, notificationSettings, type NotificationSettings } from "./api";
import { Field, FormError, useForm, value } from "./forms";
import { MyNav } from "./mynav";

interface Draft {
  email: string;
  causes: Record<string, string>;
  digest: string;
  digest_hour: string;
  time_zone: string;
}

const toDraft = (s: NotificationSettings): Draft => ({
  email: s.email ?? "",
  causes: { ...s.causes },
  digest: s.digest,
  digest_hour: s.digest_hour === null ? "" : String(s.digest_hour),
  time_zone: s.time_zone,
});

// zones are the time zones the browser knows (every IANA name in modern browsers).
function zones(current: string): string[] {
  const all = (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.("timeZone") ?? [];
  const out = all.includes("UTC") ? all : ["UTC", ...all];
  return out.includes(current) ? out : [current, ...out];
}

export default function Page() {
  const { data, error, setData } = useLoad(notificationSettings.get, []);
  const [d, setD] = useState<Draft | null>(null);
  const [saved, setSaved] = useState("");
  useEffect(() => {
    if (data) setD(toDraft(data));
  }, [data?.version, data?.email_confirmed]);
  const causeList = data ? Object.keys(data.causes).sort() : [];
  const form = useForm(["email", "digest", "digest_hour", "time_zone", ...causeList.map((c) => "causes." + c)]);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!data || !d) return;
    setSaved("");
    // Only what changed is sent: a field left out stays as it is.
    const was = toDraft(data);
    const body: Record<string, unknown> = {};
    if (d.email.trim() !== was.email) body.email = d.email.trim() || null;
    const causes = Object.fromEntries(Object.entries(d.causes).filter(([c, v]) => was.causes[c] !== v));
    if (Object.keys(causes).length) body.causes = causes;
    if (d.digest !== was.digest) body.digest = d.digest;
    if (d.digest_hour !== was.digest_hour) body.digest_hour = d.digest_hour === "" ? null : Number(d.digest_hour);
    if (d.time_zone !== was.time_zone) body.time_zone = d.time_zone;
    if (!Object.keys(body).length) {
      setSaved("Nothing changed.");
      return;
    }
    let next: NotificationSettings | null = null;
    if (await form.submit(async () => void (next = await notificationSettings.put(body)))) {
      setData(next!);
      setSaved(body.email && !next!.email_confirmed ? `Saved. Open the link mailed to ${next!.email} to confirm it.` : "Saved.");
    }
  };
  return (
    <section class="admin">
      <h1>Notification settings</h1>
      <MyNav current="notifications" />
      <Alert error={error} />
      {data && d && (
        <form onSubmit={submit} aria-label="Notification settings">
          <FormError form={form} />
          <fieldset>
            <legend>Mail</legend>
            <Field
              form={form}
              name="email"
              label="Address"
              hint={
                data.email_source === "oidc"
                  ? "From your identity provider. Change it to have mail sent elsewhere."
                  : "Empty: no mail. A new address gets a confirmation link and nothing else until it is opened."
              }
            >
              {(a) => <input {...a} type="email" value={d.email} onInput={(e) => setD({ ...d, email: value(e) })} />}
            </Field>
            <p data-testid="email-state">
              {!data.email ? (
                "No address: notifications reach your inbox in Ballet only."
              ) : data.email_confirmed ? (
                <>
                  <Badge kind="done">confirmed</Badge> mail goes to {data.email}.
                </>
              ) : (
                <>
                  <Badge kind="pause">not confirmed</Badge> open the link mailed to {data.email}; until then nothing is mailed there.
                </>
              )}
            </p>
          </fieldset>
          <fieldset>
            <legend>What reaches you</legend>
            <div class="scroll">
              <table>
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Choice</th>
                  </tr>
                </thead>
                <tbody>
                  {causeList.map((c) => (
                    <tr key={c}>
                      <td>
                        {causeNames[c] ?? c} <span class="muted">({c})</span>
                      </td>
                      <td>
                        <Field form={form} name={"causes." + c} label={<span class="sr">Choice for {c}</span>}>
                          {(a) => (
                            <select {...a} value={d.causes[c]} onChange={(e) => setD({ ...d, causes: { ...d.causes, [c]: value(e) } })}>
                              <option value="mail">mail at once (and inbox)</option>
                              <option value="inbox">inbox and digest only</option>
                              <option value="off">off</option>
                            </select>
                          )}
                        </Field>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </fieldset>
          <fieldset>
            <legend>Digest</legend>
            <Field form={form} name="digest" label="Digest by mail">
              {(a) => (
                <select {...a} value={d.digest} onChange={(e) => setD({ ...d, digest: value(e) })}>
                  <option value="period">each period (the platform's; daily by default)</option>
                  <option value="weekly">weekly</option>
                  <option value="off">off</option>
                </select>
              )}
            </Field>
            <Field form={form} name="digest_hour" label="Hour it is sent" hint="In your time zone; none chosen: the platform's.">
              {(a) => (
                <select {...a} value={d.digest_hour} onChange={(e) => setD({ ...d, digest_hour: value(e) })}>
                  <option value="">none chosen</option>
                  {Array.from({ length: 24 }, (_, h) => (
                    <option key={h} value={String(h)}>
                      {String(h).padStart(2, "0")}:00
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field form={form} name="time_zone" label="Time zone">
              {(a) => (
                <select {...a} value={d.time_zone} onChange={(e) => setD({ ...d, time_zone: value(e) })}>
                  {zones(d.time_zone).map((z) => (
                    <option key={z} value={z}>
                      {z}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          </fieldset>
          <button type="submit" disabled={form.busy}>
            Save notification settings
          </button>
          {saved && <p role="status">{saved}</p>}
        </form>
      )}
    </section>
  );
}
