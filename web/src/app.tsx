import { Component, type ComponentChildren, type ComponentType } from "preact";
import { lazy, Suspense } from "preact/compat";
import { useEffect, useLayoutEffect } from "preact/hooks";
import { signInPath } from "./api";
import { followInbox, useUnread } from "./inbox";
import { loading } from "./load";
import { match, navigate, onLinkClick, useLocation } from "./router";
import { checkSession, signOut, useSession } from "./session";
import { Shortcuts } from "./shortcuts";
import { ProjectNav, projectTabs } from "./ui";

type Page = ComponentType<Record<string, string>>;

// optional is a page another part of the UI provides (web/src/knowledge):
// its route answers "Page not found" until the module exists.
const knowledge = import.meta.glob<{ default: Page }>("./knowledge/page.tsx");
function optional(mods: Record<string, () => Promise<{ default: Page }>>): Page | null {
  const load = Object.values(mods)[0];
  return load ? lazy(load) : null;
}
const knowledgePage = optional(knowledge);

// The route table (ui-contract.md). Each page is its own chunk, so the
// first page downloads only what it needs.
const routes: [string, Page | null][] = [
  ["/signin", lazy(() => import("./pages/signin"))],
  ["/needs-me", lazy(() => import("./pages/needsme"))],
  ["/notifications", lazy(() => import("./pages/notifications"))],
  ["/orgs", lazy(() => import("./pages/orgs"))],
  ["/orgs/new", lazy(() => import("./admin/orgnew"))],
  ["/orgs/:org/settings", lazy(() => import("./admin/org"))],
  ["/orgs/:org/knowledge", knowledgePage],
  ["/orgs/:org/knowledge/:space", knowledgePage],
  ["/orgs/:org/knowledge/:space/:slug", knowledgePage],
  ["/projects/:project", lazy(() => import("./pages/board"))],
  ["/projects/:project/pipelines", lazy(() => import("./pipelines/page"))],
  ["/projects/:project/settings", lazy(() => import("./pages/settings"))],
  ["/projects/:project/members", lazy(() => import("./admin/projectmembers"))],
  ["/projects/:project/webhooks", lazy(() => import("./admin/projectwebhooks"))],
  ["/items/:item", lazy(() => import("./pages/ticket"))],
  ["/platform", lazy(() => import("./pages/platform"))],
  ["/runners", lazy(() => import("./admin/runners"))],
  ["/me/notifications", lazy(() => import("./admin/notifysettings"))],
  ["/me/tokens", lazy(() => import("./admin/tokens"))],
];

function NotFound() {
  useEffect(() => void (document.body.dataset.ready = "1"), []);
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        <a href="/needs-me">Back to what needs you</a>
      </p>
    </section>
  );
}

// InboxLink is the navigation's link to the notifications, with the unread
// count as a badge. The badge keeps its place when the count is zero (no
// jump in the navigation); its words are for screen readers too.
function InboxLink({ current }: { current: boolean }) {
  const n = useUnread();
  const shown = n ? (n > 99 ? "99+" : String(n)) : "";
  return (
    <a href="/notifications" aria-current={current ? "page" : undefined} data-testid="inbox-link">
      Notifications
      <span class={"count" + (shown ? "" : " none")} data-testid="unread-count" data-count={n ?? ""}>
        {shown && <span class="sr">, </span>}
        {shown}
        {shown && <span class="sr"> unread</span>}
      </span>
    </a>
  );
}

// PageError shows a page that failed to render or to download (a chunk of an
// older build after an upgrade) instead of a blank screen.
class PageError extends Component<{ children: ComponentChildren }, { error: string }> {
  state = { error: "" };
  componentDidCatch(e: unknown) {
    this.setState({ error: e instanceof Error ? e.message : String(e) });
    document.body.dataset.ready = "1";
  }
  render() {
    if (!this.state.error) return this.props.children;
    return (
      <section>
        <h1>This page could not be shown</h1>
        <p role="alert" class="alert">
          {this.state.error}
        </p>
        <p>
          <button type="button" onClick={() => location.reload()}>
            Reload
          </button>
        </p>
      </section>
    );
  }
}

export function App() {
  const loc = useLocation();
  const session = useSession();
  const path = loc.pathname;
  const signin = path === "/signin";

  // Who is signed in. The sign-in page does not ask: signed out, the answer
  // would be a 401, which the browser logs as an error in its console.
  useEffect(() => {
    if (session === undefined && !signin) void checkSession();
  }, [session, signin]);
  // Each navigation starts a page load (the browser tests wait for ready = 1).
  useLayoutEffect(loading, [path]);
  useEffect(() => {
    if (path === "/") navigate("/needs-me", true);
    else if (session === null && !signin) navigate(signInPath(), true);
  }, [path, session, signin]);
  // The person's notifications, followed live on every page.
  const subject = session?.subject;
  useEffect(() => (subject ? followInbox() : undefined), [subject]);
  useEffect(() => {
    const title = document.querySelector("main h1")?.textContent;
    document.title = title ? `${title} · Ballet` : "Ballet";
  });

  let page = <NotFound />;
  for (const [pattern, Page] of routes) {
    const params = match(pattern, path);
    if (params) {
      if (Page) page = <Page key={path} {...params} />;
      break;
    }
  }
  if (!signin && !session) page = <p>Loading…</p>;
  // A project's pages (board, pipelines, settings) share their tabs.
  const project = match("/projects/:project", path) ?? match("/projects/:project/:tab", path);
  const tab = projectTabs.find((t) => path.endsWith("/" + t)) ?? "board";

  return (
    <div class="shell" onClick={onLinkClick}>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header>
        <a class="brand" href="/needs-me">
          Ballet
        </a>
        {session && (
          <>
            <nav aria-label="Main">
              <ul>
                <li>
                  <a href="/needs-me" aria-current={path === "/needs-me" ? "page" : undefined}>
                    Needs me
                  </a>
                </li>
                <li>
                  <InboxLink current={path === "/notifications"} />
                </li>
                <li>
                  <a href="/orgs" aria-current={path === "/orgs" ? "page" : undefined}>
                    Projects
                  </a>
                </li>
                <li>
                  <a href="/me/notifications" aria-current={path.startsWith("/me/") ? "page" : undefined}>
                    Account
                  </a>
                </li>
                {session.platform_admin && (
                  <li>
                    <a href="/platform" aria-current={path === "/platform" ? "page" : undefined}>
                      Platform
                    </a>
                  </li>
                )}
                {session.platform_admin && (
                  <li>
                    <a href="/runners" aria-current={path === "/runners" ? "page" : undefined}>
                      Runners
                    </a>
                  </li>
                )}
              </ul>
            </nav>
            <div class="user">
              <span class="muted keys-hint">
                Press <kbd>?</kbd> for shortcuts
              </span>
              <span data-testid="user">{session.name || session.subject}</span>
              <button type="button" onClick={() => void signOut()}>
                Sign out
              </button>
            </div>
          </>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {session && project && (project.tab === undefined || project.tab === tab) && <ProjectNav project={project.project} current={tab} />}
        <PageError key={path}>
          <Suspense fallback={<p>Loading…</p>}>{page}</Suspense>
        </PageError>
      </main>
      {session && <Shortcuts path={path} />}
    </div>
  );
}
