// The links between a person's own settings pages.
export function MyNav({ current }: { current: "notifications" | "tokens" }) {
  return (
    <nav aria-label="Your settings" class="subnav">
      <a href="/me/notifications" aria-current={current === "notifications" ? "page" : undefined}>
        Notification settings
      </a>
      <a href="/me/tokens" aria-current={current === "tokens" ? "page" : undefined}>
        API tokens
      </a>
    </nav>
  );
}
