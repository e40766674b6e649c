// API tokens: create one (organization, role, scopes, expiry; the secret
// is shown once, with Copy), list them, revoke one (asked first). Platform
// admins also create platform_admin and runner tokens and see everyone's.
import { useState } from "preact/hooks";
import type { Organization } from "../api";
import { useLoad } from "../load";
import { useSession } from "../session";
import { Ago, Alert, Badge, useConfirm } from "../ui";
import { orgs, scopes, tokens, type CreatedToken, type Token } from "./api";
import { Field, FormError, Secret, useForm, value } from "./forms";
import { MyNav } from "./mynav";

export default function Page() {
  const { data, error, reload } = useLoad(async () => {
    const [list, os] = await Promise.all([tokens.list(), orgs.list()]);
    return { list, orgs: os };
  }, []);
  const [created, setCreated] = useState<CreatedToken | null>(null);
  const [confirm, dialog] = useConfirm();
  const rowForm = useForm([]);
  const orgName = (id?: string) => data?.orgs.find((o) => o.id === id)?.slug ?? id ?? "";
  const revoke = async (t: Token) => {
    const ok = await confirm({
      title: `Revoke ${t.name}?`,
      body: "Every request and session using it is refused at once; this cannot be undone.",
      confirm: `Revoke ${t.name}`,
      keep: "Keep it",
      danger: true,
    });
    if (ok && (await rowForm.submit(() => tokens.revoke(t.id)))) await reload();
  };
  const live = data?.list.filter((t) => t.kind !== "run") ?? [];
  return (
    <section class="admin">
      <h1>API tokens</h1>
      <MyNav current="tokens" />
      <p class="muted">A token lets a script or a service act for you in one organization, with at most your role there.</p>
      <Alert error={error} />
      {created && <Secret label={`The token ${created.name}`} secret={created.token} onDone={() => setCreated(null)} />}
      {data && (
        <NewToken
          orgs={data.orgs}
          onCreated={async (t) => {
            setCreated(t);
            await reload();
          }}
        />
      )}
      <h2>Your tokens</h2>
      {data && !live.length && <p class="muted">No tokens yet: create one above for a script or CI.</p>}
      {live.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Organization and role</th>
                <th scope="col">Scopes</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Revoke</th>
              </tr>
            </thead>
            <tbody>
              {live.map((t) => (
                <tr key={t.id} data-testid="token" data-name={t.name} data-nav>
                  <td>
                    {t.name}
                    {t.acting_for && <span class="muted"> (for {t.acting_for})</span>}
                  </td>
                  <td>{t.kind}</td>
                  <td>{t.kind === "api" ? `${orgName(t.organization_id) || "every organization"} · ${t.role}` : "—"}</td>
                  <td>{t.scopes?.length ? t.scopes.join(", ") : "all of its role"}</td>
                  <td>
                    <Ago at={t.created_at} />
                  </td>
                  <td>{t.expires_at ? <Ago at={t.expires_at} /> : "never"}</td>
                  <td>
                    {t.revoked_at ? (
                      <Badge kind="attention">revoked</Badge>
                    ) : (
                      <button type="button" class="danger" data-open disabled={rowForm.busy} onClick={() => void revoke(t)}>
                        Revoke {t.name}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <FormError form={rowForm} />
      {dialog}
    </section>
  );
}

const expiries: [string, string][] = [
  ["168h", "7 days"],
  ["720h", "30 days"],
  ["2160h", "90 days"],
  ["8760h", "1 year"],
];

function NewToken({ orgs, onCreated }: { orgs: Organization[]; onCreated: (t: CreatedToken) => Promise<void> }) {
  const session = useSession();
  const admin = session?.platform_admin ?? false;
  const form = useForm(["name", "kind", "organization", "role", "scopes", "expires_in"]);
  const [name, setName] = useState("");
  const [kind, setKind] = useState("api");
  const [org, setOrg] = useState(orgs[0]?.slug ?? "");
  const [role, setRole] = useState("");
  const [chosen, setChosen] = useState<string[]>([]);
  const [expires, setExpires] = useState("2160h");
  const platformToken = role === "platform_admin";
  const submit = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { name: name.trim(), expires_in: expires || undefined };
    if (kind === "runner") body.kind = "runner";
    else {
      if (!platformToken) body.organization = org;
      if (role) body.role = role;
      if (chosen.length) body.scopes = chosen;
    }
    let made: CreatedToken | null = null;
    if (await form.submit(async () => void (made = await tokens.create(body)))) {
      setName("");
      setChosen([]);
      await onCreated(made!);
    }
  };
  return (
    <form onSubmit={submit} aria-label="New token">
      <h2>New token</h2>
      <FormError form={form} />
      <Field form={form} name="name" label="Name" hint="What it is for, e.g. ci or the release script.">
        {(a) => <input {...a} required value={name} onInput={(e) => setName(value(e))} />}
      </Field>
      {admin && (
        <Field form={form} name="kind" label="Kind">
          {(a) => (
            <select {...a} value={kind} onChange={(e) => setKind(value(e))}>
              <option value="api">api: acts for you</option>
              <option value="runner">runner: for a ballet runner process</option>
            </select>
          )}
        </Field>
      )}
      {kind === "api" && (
        <>
          {!platformToken && (
            <Field form={form} name="organization" label="Organization">
              {(a) => (
                <select {...a} value={org} onChange={(e) => setOrg(value(e))}>
                  {orgs.map((o) => (
                    <option key={o.id} value={o.slug}>
                      {o.name} ({o.slug})
                    </option>
                  ))}
                </select>
              )}
            </Field>
          )}
          <Field form={form} name="role" label="Role" hint="At most your own role there; it never acts above your current role.">
            {(a) => (
              <select {...a} value={role} onChange={(e) => setRole(value(e))}>
                <option value="">your role there</option>
                <option value="viewer">viewer</option>
                <option value="member">member</option>
                <option value="admin">admin</option>
                {admin && <option value="platform_admin">platform_admin (every organization)</option>}
              </select>
            )}
          </Field>
          <fieldset aria-describedby={form.fieldError("scopes") ? `${form.id}-scopes-error` : undefined}>
            <legend>Scopes (none: everything its role allows)</legend>
            <div class="checks">
              {scopes.map((s) => (
                <label key={s} class="check">
                  <input
                    type="checkbox"
                    checked={chosen.includes(s)}
                    onChange={(e) => setChosen((e.currentTarget as HTMLInputElement).checked ? [...chosen, s] : chosen.filter((x) => x !== s))}
                  />
                  {s}
                </label>
              ))}
            </div>
            {form.fieldError("scopes") && (
              <span class="field-error" id={`${form.id}-scopes-error`}>
                {form.fieldError("scopes")}
              </span>
            )}
          </fieldset>
        </>
      )}
      <Field form={form} name="expires_in" label="Expires after">
        {(a) => (
          <select {...a} value={expires} onChange={(e) => setExpires(value(e))}>
            {kind === "runner" && <option value="">never</option>}
            {expiries.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        )}
      </Field>
      <button type="submit" disabled={form.busy}>
        Create token
      </button>
    </form>
  );
}
