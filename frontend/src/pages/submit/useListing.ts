import { useEffect, useState } from 'react';
import { isAbort } from '../../api/client';

/** A list the submit form loads once (the models, the rewards): the list, null while it loads,
 * or the error that kept it away. A load left behind by an unmounted form is aborted. */
export function useListing<T>(load: (signal: AbortSignal) => Promise<T[]>): { items: T[] | null; error: string } {
  const [items, setItems] = useState<T[] | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    const controller = new AbortController();
    load(controller.signal)
      .then(setItems)
      .catch((e: unknown) => {
        if (!isAbort(e)) setError(e instanceof Error ? e.message : String(e));
      });
    return () => controller.abort();
    // Loaded once per form: the client does not change while the form is open.
  }, []);
  return { items, error };
}
