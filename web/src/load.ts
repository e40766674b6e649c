// Page data loading and the readiness marker the browser tests wait for:
// document.body.dataset.ready is "0" while a page loads its data and "1"
// once every load it started has finished (ui-contract.md).
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";

let pending = 0;

function settle() {
  document.body.dataset.ready = pending ? "0" : "1";
}

// loading marks the page as loading; App calls it on each navigation until
// the new page's first render.
export function loading() {
  document.body.dataset.ready = "0";
}

// useReady marks a page without data as ready once rendered.
export function useReady() {
  useEffect(settle, []);
}

export interface Loaded<T> {
  data: T | undefined;
  error: string;
  reload: () => Promise<void>;
  setData: (d: T) => void;
}

// useLoad runs fn when the page opens (and when deps change), keeping the
// last data while a reload runs. Errors read as the API's message.
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState("");
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const gen = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++gen.current;
    pending++;
    settle();
    try {
      const d = await fnRef.current();
      if (mine === gen.current) {
        setData(d);
        setError("");
      }
    } catch (e) {
      if (mine === gen.current) setError(message(e));
    } finally {
      pending--;
      // Let the page render what arrived before it counts as ready.
      setTimeout(settle, 0);
    }
  }, []);
  // A layout effect: the marker turns "0" in the render that needs the data,
  // before the browser paints, so no test reads a stale "1" in between.
  useLayoutEffect(() => {
    void reload();
    return () => void gen.current++;
  }, deps);
  return { data, error, reload, setData };
}

// message is what a person reads for an error.
export function message(e: unknown): string {
  if (e instanceof ApiError) return e.full;
  return e instanceof Error ? e.message : String(e);
}

// useAction runs one write at a time, with its error for role="alert".
export function useAction(): [(fn: () => Promise<unknown>) => Promise<boolean>, boolean, string, (s: string) => void] {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError("");
    try {
      await fn();
      return true;
    } catch (e) {
      setError(message(e));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return [run, busy, error, setError];
}

// useDebounced calls fn once after a burst of calls (live events come in bursts).
// The function it returns stays the same across renders (a subscription made
// once keeps calling the latest fn, after the latest ms).
export function useDebounced(fn: () => void, ms = 150): () => void {
  const ref = useRef({ fn, ms });
  ref.current = { fn, ms };
  const timer = useRef<number | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = window.setTimeout(() => ref.current.fn(), ref.current.ms);
  }, []);
}
