// StartHints says, next to Start now, what keeps a ready ticket from
// starting or from getting anywhere once started, as Core reads it (the
// ticket's start.holds): open blockers (the API refuses the start and
// names them), no repository, a paused project or platform, a concurrency
// limit reached, a ticket or daily budget used up.
import type { Item } from "../api";

export function StartHints({ item }: { item: Item }) {
  const holds = item.start?.holds ?? [];
  if (!holds.length) return null;
  return (
    <ul class="notice" data-testid="start-hints" aria-label="Why it may not start">
      {holds.map((h) => (
        <li key={h.code} data-code={h.code}>
          {h.message}
        </li>
      ))}
    </ul>
  );
}
