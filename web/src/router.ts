// A small history router: the current path as state, links that push.
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false) {
  if (to === location.pathname + location.search + location.hash) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  listeners.forEach((l) => l());
}

addEventListener("popstate", () => listeners.forEach((l) => l()));

export function useLocation(): URL {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((t) => t + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return new URL(location.href);
}

// match returns the named segments of pattern ("/items/:key") in path, or null.
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/").filter(Boolean);
  const s = path.split("/").filter(Boolean);
  if (p.length !== s.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) {
      try {
        out[p[i].slice(1)] = decodeURIComponent(s[i]);
      } catch {
        return null; // a malformed escape is no route
      }
    } else if (p[i] !== s[i]) return null;
  }
  return out;
}

// serverPaths are Core's own (sign-in redirects, the API): a link there loads the page.
const serverPaths = ["/auth/", "/api/"];

// onLinkClick makes an <a href> navigate without a reload.
export function onLinkClick(e: MouseEvent) {
  const a = (e.target as HTMLElement).closest("a");
  if (!a || a.target || a.origin !== location.origin || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || e.button !== 0) return;
  if (a.hasAttribute("download") || serverPaths.some((p) => a.pathname.startsWith(p))) return;
  e.preventDefault();
  navigate(a.pathname + a.search + a.hash);
}
