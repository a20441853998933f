import { QueryClient } from '@tanstack/react-query';
import { ApiError } from '../api/errors';

/** Attempts after the first failure of a read (network errors and 5xx only). */
export const MAX_RETRIES = 3;
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 8_000;

/**
 * Whether a failed read is worth another try. A 4xx answer (not found, forbidden, a bad
 * filter) says the same thing the next time, so it is shown at once; a network error or a
 * 5xx (a restart, a proxy's 502) may heal within seconds.
 */
export function shouldRetry(failureCount: number, error: unknown): boolean {
  if (error instanceof ApiError && error.status >= 400 && error.status < 500) return false;
  return failureCount < MAX_RETRIES;
}

/** Delay before retry `attempt` (0-based): 1 s, 2 s, 4 s, then 8 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.max(0, attempt));
}

/**
 * The dashboard's one cache of server state. Reads retry as above; a page's data is
 * refetched when it mounts or the window regains focus, and polled only where the page
 * asks for it (`refetchInterval`), never while the tab is hidden.
 */
export function createQueryClient(opts: { retryDelay?: (attempt: number) => number } = {}): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        retry: shouldRetry,
        retryDelay: opts.retryDelay ?? retryDelayMs,
      },
      // Writes are not repeated behind the user's back: an action is retried by clicking again.
      mutations: { retry: false },
    },
  });
}

/** A query's error as the ApiError the pages render. */
export function asApiError(error: unknown): ApiError {
  return error instanceof ApiError ? error : new ApiError(0, 'error', String(error));
}
