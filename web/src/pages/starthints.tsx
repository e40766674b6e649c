// StartHints says, next to Start now, what keeps a ready ticket from
// starting or from getting anywhere once started: open blockers (the API
// refuses the start and names them), a paused project or platform (the
// flow waits), no repository (agents have nothing to work on).
import { enc, get, tickets, type Item, type Platform, type Project } from "../api";
import { useLoad } from "../load";

export function StartHints({ item }: { item: Item }) {
  const project = item.key.slice(0, item.key.lastIndexOf("-"));
  const { data } = useLoad(async () => {
    const [p, pl, blockers] = await Promise.all([
      get<Project>(`/api/v1/projects/${enc(project)}`),
      get<Platform>("/api/v1/platform"),
      Promise.all((item.blocked_by ?? []).map((k) => tickets.get(k).catch(() => null))),
    ]);
    return { p, pl, open: blockers.filter((b): b is Item => !!b && b.state !== "done" && b.state !== "cancelled") };
  }, [item.key, item.version]);
  if (!data) return null;
  const reasons: string[] = [];
  if (data.open.length)
    reasons.push(`Blocked by ${data.open.map((b) => `${b.key} (${b.state})`).join(", ")}: it can start once each is done or cancelled.`);
  if (!data.p.repository) reasons.push(`${data.p.key} has no repository: set one in the project's settings before agents can work.`);
  if (data.p.paused) reasons.push(`${data.p.key} is paused: a flow started now waits until the project is resumed.`);
  if (data.pl.paused) reasons.push("The platform's kill switch is pulled: no stage starts anywhere until it is released.");
  if (!reasons.length) return null;
  return (
    <ul class="notice" data-testid="start-hints" aria-label="Why it may not start">
      {reasons.map((r) => (
        <li key={r}>{r}</li>
      ))}
    </ul>
  );
}
