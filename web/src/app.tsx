import type { ComponentType } from "preact";
import { lazy, Suspense } from "preact/compat";

type Page = ComponentType<Record<string, string>>;
import { match, onLinkClick, useLocation } from "./router";

// Each page is its own chunk, so the first page downloads only what it needs.
const routes: [string, Page][] = [
  ["/needs-me", lazy(() => import("./pages/needsme"))],
  ["/projects/:project", lazy(() => import("./pages/board"))],
  ["/projects/:project/pipelines", lazy(() => import("./pipelines/page"))],
  ["/items/:item", lazy(() => import("./pages/ticket"))],
];

export function App() {
  const loc = useLocation();
  let page = <p>Page not found.</p>;
  for (const [pattern, Page] of routes) {
    const params = match(pattern, loc.pathname);
    if (params) {
      page = <Page {...params} />;
      break;
    }
  }
  return (
    <div onClick={onLinkClick}>
      <header>
        <nav aria-label="Main">
          <a href="/needs-me">Needs me</a>
        </nav>
      </header>
      <main>
        <Suspense fallback={<p>Loading…</p>}>{page}</Suspense>
      </main>
    </div>
  );
}
