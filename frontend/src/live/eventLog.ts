import type { JobEvent } from '../api/types';

/** Rows the job page keeps in its events list; older ones are dropped. */
export const MAX_EVENT_ROWS = 500;

/**
 * Merge a batch of events into a list sorted by seq, keeping one event per seq and
 * only the newest `cap`. The live case (every incoming seq is above the last one held)
 * is a concat; a replay that overlaps what is held (after a reconnect that raced
 * with a reload, say) falls back to a keyed merge in which the held event wins.
 */
export function mergeEvents(
  existing: readonly JobEvent[],
  incoming: readonly JobEvent[],
  cap = MAX_EVENT_ROWS,
): JobEvent[] {
  if (incoming.length === 0) return existing.length > cap ? existing.slice(-cap) : existing.slice();
  let last = existing.length ? existing[existing.length - 1]!.seq : -Infinity;
  let appendOnly = true;
  for (const event of incoming) {
    if (event.seq <= last) {
      appendOnly = false;
      break;
    }
    last = event.seq;
  }
  let merged: JobEvent[];
  if (appendOnly) {
    merged = existing.concat(incoming);
  } else {
    const bySeq = new Map<number, JobEvent>();
    for (const event of incoming) if (!bySeq.has(event.seq)) bySeq.set(event.seq, event);
    for (const event of existing) bySeq.set(event.seq, event);
    merged = Array.from(bySeq.values()).sort((a, b) => a.seq - b.seq);
  }
  return merged.length > cap ? merged.slice(merged.length - cap) : merged;
}

/** The highest seq in a batch, or `after` if the batch holds nothing newer. */
export function lastSeq(events: readonly JobEvent[], after = 0): number {
  let max = after;
  for (const event of events) if (event.seq > max) max = event.seq;
  return max;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? fallback : String(value);
}

/**
 * Parse one WebSocket message (`{"type": "event", "event": {...}}`) into an event, or
 * null for anything else: another message type, malformed JSON, or an event kind this
 * version of the dashboard does not know (the server may add kinds before we do).
 * Fields are normalised so that rendering code can trust the types.
 */
export function parseEventMessage(text: string): JobEvent | null {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(message) || message.type !== 'event' || !isRecord(message.event)) return null;
  const { seq, kind, created_at, data } = message.event;
  if (typeof seq !== 'number' || !Number.isFinite(seq) || !isRecord(data)) return null;
  const base = { seq, created_at: str(created_at) };
  switch (kind) {
    case 'status':
      return { ...base, kind, data: { status: str(data.status), reason: str(data.reason) } };
    case 'log':
      return { ...base, kind, data: { level: str(data.level, 'info'), message: str(data.message) } };
    case 'metrics': {
      if (typeof data.step !== 'number' || !Number.isFinite(data.step)) return null;
      const metrics: Record<string, number> = {};
      if (isRecord(data.metrics)) {
        for (const [name, value] of Object.entries(data.metrics)) {
          if (typeof value === 'number' && Number.isFinite(value)) metrics[name] = value;
        }
      }
      return { ...base, kind, data: { step: data.step, metrics } };
    }
    default:
      return null;
  }
}
