// Sign in: a token (the bootstrap token or an API token) or the configured
// OIDC provider. After it, the browser goes back to ?next (a path here).
import { useEffect, useState } from "preact/hooks";
import { post, type Session } from "../api";
import { useAction, useReady } from "../load";
import { navigate } from "../router";
import { config, setSession, useSession } from "../session";
import { Alert } from "../ui";

// nextPath is ?next when it is a path of this site, else /needs-me.
function nextPath(): string {
  const n = new URLSearchParams(location.search).get("next") || "";
  return n.startsWith("/") && !n.startsWith("//") && !n.startsWith("/\\") && !n.startsWith("/signin") ? n : "/needs-me";
}

export default function Page() {
  const session = useSession();
  const [token, setToken] = useState("");
  const [run, busy, error] = useAction();
  useReady();
  useEffect(() => {
    if (session) navigate(nextPath(), true);
  }, [session]);

  const submit = async (e: Event) => {
    e.preventDefault();
    await run(async () => {
      const s = await post<Session>("/api/v1/session", { token: token.trim() }, { quiet401: true });
      setToken("");
      setSession(s);
    });
  };

  return (
    <section class="signin">
      <h1>Sign in to Ballet</h1>
      <form onSubmit={submit}>
        <label for="token">Token</label>
        <p class="hint" id="token-hint">
          The bootstrap token (in <code>data/bootstrap-token</code> next to the database) or an API token.
        </p>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          required
          aria-describedby="token-hint"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <Alert error={error} />
        <button type="submit" disabled={busy || !token.trim()}>
          Sign in
        </button>
      </form>
      {config.oidc && (
        <p>
          <a class="button" href={"/auth/oidc/login?next=" + encodeURIComponent(nextPath())}>
            Sign in with OIDC
          </a>
        </p>
      )}
    </section>
  );
}
