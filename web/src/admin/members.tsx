// Members of an organization (roles) or of a project (role overrides):
// list, add, change a role, remove (asked first).
import { useState } from "preact/hooks";
import { useLoad } from "../load";
import { Ago, Alert, useConfirm } from "../ui";
import { members, roles, type Member } from "./api";
import { Field, FormError, useForm, value } from "./forms";

export function Members({ base, canManage, scope }: { base: string; canManage: boolean; scope: string }) {
  const api = members(base);
  const { data, error, reload } = useLoad(api.list, [base]);
  const [confirm, dialog] = useConfirm();
  const rowForm = useForm([]);
  const remove = async (m: Member) => {
    const ok = await confirm({
      title: `Remove ${m.subject}?`,
      body: `${m.subject} loses the ${m.role} role in ${scope}; API tokens acting for them can do nothing there any more.`,
      confirm: `Remove ${m.subject}`,
      keep: "Keep them",
      danger: true,
    });
    if (ok && (await rowForm.submit(() => api.remove(m.subject)))) await reload();
  };
  const change = async (m: Member, role: string) => {
    if (await rowForm.submit(() => api.set(m.subject, role))) await reload();
  };
  return (
    <section aria-labelledby={`${base}-members-h`} class="admin">
      <h2 id={`${base}-members-h`}>Members</h2>
      <Alert error={error} />
      {data && !data.length && <p class="muted">No members yet{canManage ? ": add one below." : "."}</p>}
      {data && data.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">Role</th>
                <th scope="col">Since</th>
                {canManage && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {data.map((m) => (
                <tr key={m.subject} data-testid="member" data-subject={m.subject} data-nav>
                  <td>{m.subject}</td>
                  <td>
                    {canManage ? (
                      <select
                        aria-label={`Role of ${m.subject}`}
                        data-open
                        value={m.role}
                        disabled={rowForm.busy}
                        onChange={(e) => void change(m, value(e))}
                      >
                        {roles.map((r) => (
                          <option key={r} value={r}>
                            {r}
                          </option>
                        ))}
                      </select>
                    ) : (
                      m.role
                    )}
                  </td>
                  <td>
                    <Ago at={m.created_at} />
                  </td>
                  {canManage && (
                    <td>
                      <button type="button" class="secondary" disabled={rowForm.busy} onClick={() => void remove(m)}>
                        Remove {m.subject}
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <FormError form={rowForm} />
      {canManage && <AddMember base={base} scope={scope} onAdded={reload} />}
      {dialog}
    </section>
  );
}

function AddMember({ base, scope, onAdded }: { base: string; scope: string; onAdded: () => Promise<void> }) {
  const form = useForm(["subject", "role"]);
  const [subject, setSubject] = useState("");
  const [role, setRole] = useState("member");
  const [added, setAdded] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setAdded("");
    const who = subject.trim();
    if (await form.submit(() => members(base).set(who, role))) {
      setAdded(`${who} is ${role} in ${scope}.`);
      setSubject("");
      await onAdded();
    }
  };
  return (
    <form onSubmit={submit} aria-label={`Add a member to ${scope}`}>
      <h3>Add a member</h3>
      <FormError form={form} />
      <Field form={form} name="subject" label="Subject" hint="Their OIDC subject (the sub claim), as they sign in.">
        {(a) => <input {...a} required value={subject} onInput={(e) => setSubject(value(e))} />}
      </Field>
      <Field form={form} name="role" label="Role">
        {(a) => (
          <select {...a} value={role} onChange={(e) => setRole(value(e))}>
            <option value="viewer">viewer: reads</option>
            <option value="member">member: writes tickets, answers, approves, starts</option>
            <option value="admin">admin: settings, pipelines, members</option>
          </select>
        )}
      </Field>
      <button type="submit" disabled={form.busy}>
        Add member
      </button>
      {added && <p role="status">{added}</p>}
    </form>
  );
}
