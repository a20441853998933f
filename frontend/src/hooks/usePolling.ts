import { useEffect, useLayoutEffect, useRef } from 'react';
import { isAbort } from '../api/client';

/**
 * Run `load` now and then `intervalMs` after each run finishes (never two at once),
 * while `enabled`. Runs are skipped while the tab is hidden and resume, at once, when
 * it is shown again. `load` gets an AbortSignal that fires on unmount or when `deps`
 * change; aborted runs report nothing. Other failures go to `onError` and polling
 * carries on, so a brief outage heals by itself.
 */
export function usePolling(
  load: (signal: AbortSignal) => Promise<void>,
  intervalMs: number,
  deps: readonly unknown[],
  opts: { enabled?: boolean; onError?: (error: unknown) => void } = {},
): void {
  const enabled = opts.enabled ?? true;
  // The latest callbacks, without restarting the loop each render.
  const loadRef = useRef(load);
  const onErrorRef = useRef(opts.onError);
  useLayoutEffect(() => {
    loadRef.current = load;
    onErrorRef.current = opts.onError;
  });

  useEffect(() => {
    if (!enabled) return;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | null = null;
    let running = false;

    const run = async () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      if (running || controller.signal.aborted) return;
      if (document.hidden) return; // visibilitychange brings us back
      running = true;
      try {
        await loadRef.current(controller.signal);
      } catch (error) {
        if (!isAbort(error) && !controller.signal.aborted) onErrorRef.current?.(error);
      } finally {
        running = false;
        if (!controller.signal.aborted) timer = setTimeout(run, intervalMs);
      }
    };
    const onVisibility = () => {
      if (!document.hidden) void run();
    };

    document.addEventListener('visibilitychange', onVisibility);
    void run();
    return () => {
      controller.abort();
      if (timer !== null) clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [enabled, intervalMs, ...deps]);
}
