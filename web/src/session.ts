// The signed-in person (GET /api/v1/session) and the configuration Core
// injects into the page (internal/webui).
import { useEffect, useState } from "preact/hooks";
import { del, get, onUnauthorized, type Session } from "./api";

export interface Config {
  oidc: boolean;
}

// config is what Core wrote into <script id="ballet-config">.
export const config: Config = (() => {
  try {
    return { oidc: false, ...JSON.parse(document.getElementById("ballet-config")?.textContent || "{}") };
  } catch {
    return { oidc: false };
  }
})();

// undefined: not asked yet; null: signed out.
let current: Session | null | undefined;
const listeners = new Set<() => void>();

export function setSession(s: Session | null) {
  current = s;
  listeners.forEach((l) => l());
}

// A 401 on any request means the session ended (expired, signed out elsewhere).
onUnauthorized(() => setSession(null));

export async function checkSession(): Promise<Session | null> {
  try {
    setSession(await get<Session>("/api/v1/session", { quiet401: true }));
  } catch {
    setSession(null);
  }
  return current!;
}

export async function signOut() {
  try {
    await del("/api/v1/session");
  } finally {
    setSession(null);
  }
}

export function useSession(): Session | null | undefined {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((t) => t + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return current;
}
