// The shell's keyboard shortcuts (keys.ts): j/k select in the page's list
// (each entry marked data-nav, its link to open data-open or its first
// link), Enter opens it, / focuses the page's search box (data-search or
// a search input), "g b" the board, "g n" Needs me, ? the help dialog.
// Nothing fires while someone types, with a modifier, or under a modal.
import { useEffect, useRef, useState } from "preact/hooks";
import { boardOf, Keymap, move, shortcuts, typing } from "./keys";
import { navigate } from "./router";

const LAST_PROJECT = "ballet.lastProject";

function entries(): HTMLElement[] {
  return [...document.querySelectorAll<HTMLElement>("main [data-nav]")].filter((el) => el.getClientRects().length > 0);
}

// opener is what opens an entry: its data-open element, else its first
// link. An entry with no page of its own (a member, a token, a runner)
// marks the control where a person acts on it.
function opener(el: HTMLElement): HTMLElement | null {
  return el.querySelector<HTMLElement>("[data-open]") ?? el.querySelector<HTMLElement>("a[href]");
}

const isLink = (el: HTMLElement | null) => !!el?.matches("a[href]");

// select marks the entry as selected and focuses its link (the entry
// itself when it opens no page: a focused control would take j and k as
// typing), so that Enter opens it and a screen reader says what it is.
function select(list: HTMLElement[], i: number) {
  for (const el of list) if (el.dataset.selected) delete el.dataset.selected;
  const el = list[i];
  if (!el) return;
  el.dataset.selected = "true";
  const link = opener(el);
  if (!isLink(link) && !el.hasAttribute("tabindex")) el.tabIndex = -1;
  (link && isLink(link) ? link : el).focus({ preventScroll: true });
  el.scrollIntoView({ block: "nearest", inline: "nearest" });
}

export function Shortcuts({ path }: { path: string }) {
  const [help, setHelp] = useState(false);
  const dialog = useRef<HTMLDialogElement>(null);
  const keymap = useRef(new Keymap());

  // The board a later "g b" opens, when the page has no project.
  useEffect(() => {
    const p = boardOf(path, "");
    if (p) sessionStorage.setItem(LAST_PROJECT, p);
  }, [path]);

  useEffect(() => {
    const d = dialog.current;
    if (help && d && !d.open) d.showModal();
  }, [help]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.isComposing) return;
      if (typing(e.target as HTMLElement) || document.querySelector("dialog[open]")) return;
      const cmd = keymap.current.press(e, e.timeStamp);
      if (!cmd) return;
      const list = entries();
      const at = list.findIndex((el) => el.dataset.selected === "true");
      switch (cmd) {
        case "next":
        case "prev": {
          if (!list.length) return;
          const from = at >= 0 ? at : list.findIndex((el) => el.contains(document.activeElement));
          select(list, move(from, list.length, cmd));
          break;
        }
        case "open": {
          // Enter opens the selected entry when nothing else has the focus
          // (or the entry itself has it); a focused link or button answers
          // Enter itself. An entry without a page of its own puts the
          // focus on its control: acting is then the person's next key.
          const active = document.activeElement as HTMLElement | null;
          if (at < 0 || (active && active !== document.body && active.id !== "main" && active !== list[at])) return;
          const target = opener(list[at]);
          if (!target) return;
          if (isLink(target)) target.click();
          else target.focus();
          break;
        }
        case "search": {
          const box = document.querySelector<HTMLElement>('main [data-search], main input[type="search"]');
          if (!box) return;
          box.focus();
          break;
        }
        case "board": {
          const p = boardOf(location.pathname, sessionStorage.getItem(LAST_PROJECT) ?? "");
          navigate(p ? `/projects/${encodeURIComponent(p)}` : "/orgs");
          break;
        }
        case "needs-me":
          navigate("/needs-me");
          break;
        case "help":
          setHelp(true);
          break;
      }
      e.preventDefault();
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);

  if (!help) return null;
  const close = () => {
    dialog.current?.close();
    setHelp(false);
  };
  return (
    <dialog ref={dialog} class="keys" aria-labelledby="keys-title" data-testid="shortcuts" onCancel={(e) => (e.preventDefault(), close())}>
      <h2 id="keys-title">Keyboard shortcuts</h2>
      <dl>
        {shortcuts.map(([keys, what]) => (
          <>
            <dt>
              {keys.map((k, i) => (
                <>
                  {i > 0 && " then "}
                  <kbd>{k}</kbd>
                </>
              ))}
            </dt>
            <dd>{what}</dd>
          </>
        ))}
      </dl>
      <p class="muted">Shortcuts do nothing while you type in a field.</p>
      <button type="button" autofocus onClick={close}>
        Close
      </button>
    </dialog>
  );
}
