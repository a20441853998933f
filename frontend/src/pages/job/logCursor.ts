// The logs panel's state: the lines read so far and the cursor of the next request.

import type { LogLine, LogsPage } from '../../api/types';

/** Lines kept in the panel; older ones are dropped (and counted) past this. */
export const MAX_LOG_LINES = 2000;
/** The server answers at most this many lines a request: a full page means more wait. */
export const SERVER_LOG_PAGE = 1000;

export interface LogState {
  /** Oldest first, unique by seq. */
  lines: readonly LogLine[];
  /** Ask for lines after this seq next (0: from the start). */
  cursor: number;
  /** How many old lines were dropped to stay under `MAX_LOG_LINES`. */
  dropped: number;
}

export const EMPTY_LOGS: LogState = { lines: [], cursor: 0, dropped: 0 };

/**
 * Fold one GET /logs?after=<cursor> answer into the state. Lines at or before the cursor
 * (an overlapping request's) are ignored, so applying a page twice changes nothing; the
 * cursor never moves backwards. Returns `state` itself when nothing changed.
 */
export function applyLogPage(state: LogState, page: LogsPage, maxLines = MAX_LOG_LINES): LogState {
  const fresh = page.results.filter((l) => Number.isFinite(l.seq) && l.seq > state.cursor);
  const seen = new Set<number>();
  const added: LogLine[] = [];
  for (const line of [...fresh].sort((a, b) => a.seq - b.seq)) {
    if (seen.has(line.seq)) continue;
    seen.add(line.seq);
    added.push(line);
  }
  const lastSeq = added.length ? added[added.length - 1]!.seq : 0;
  const cursor = Math.max(state.cursor, lastSeq, page.next_after ?? 0);
  if (added.length === 0 && cursor === state.cursor) return state;

  let lines = state.lines.concat(added);
  let dropped = state.dropped;
  if (lines.length > maxLines) {
    dropped += lines.length - maxLines;
    lines = lines.slice(lines.length - maxLines);
  }
  return { lines, cursor, dropped };
}

/** True when the server probably holds more lines past this page (ask again at once). */
export function hasMore(page: LogsPage): boolean {
  return page.results.length >= SERVER_LOG_PAGE && page.next_after !== null;
}
