// New organization (platform admins): slug and name; then its page, where
// its members and projects are added.
import { useState } from "preact/hooks";
import { enc } from "../api";
import { useReady } from "../load";
import { navigate } from "../router";
import { useSession } from "../session";
import { orgs } from "./api";
import { Field, FormError, useForm, value } from "./forms";

export default function Page() {
  useReady();
  const session = useSession();
  const form = useForm(["slug", "name"]);
  const [slug, setSlug] = useState("");
  const [name, setName] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await form.submit(() => orgs.create(slug.trim(), name.trim()))) navigate(`/orgs/${enc(slug.trim())}/settings`);
  };
  return (
    <section class="admin">
      <h1>New organization</h1>
      {!session?.platform_admin && <p class="notice">Only platform admins create organizations: the API will refuse this form.</p>}
      <form onSubmit={submit} aria-label="New organization">
        <FormError form={form} />
        <Field form={form} name="name" label="Name">
          {(a) => (
            <input
              {...a}
              required
              value={name}
              onInput={(e) => {
                const n = value(e);
                // The slug follows the name until the person edits it.
                if (slug === slugOf(name)) setSlug(slugOf(n));
                setName(n);
              }}
            />
          )}
        </Field>
        <Field form={form} name="slug" label="Slug" hint="3–40 lower-case letters, digits or dashes: the organization's address (/orgs/acme).">
          {(a) => <input {...a} required value={slug} onInput={(e) => setSlug(value(e))} />}
        </Field>
        <button type="submit" disabled={form.busy}>
          Create organization
        </button>
      </form>
    </section>
  );
}

function slugOf(name: string): string {
  return name
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
}
