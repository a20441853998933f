import { describe, expect, it } from 'vitest';
import type { JobEvent } from '../api/types';
import { lastSeq, mergeEvents, parseEventMessage } from './eventLog';

function log(seq: number, message = `m${seq}`): JobEvent {
  return { seq, kind: 'log', created_at: '2025-01-01T00:00:00Z', data: { level: 'info', message } };
}
const seqs = (events: JobEvent[]) => events.map((e) => e.seq);

describe('mergeEvents', () => {
  it('appends a live batch', () => {
    expect(seqs(mergeEvents([log(1), log(2)], [log(3), log(4)]))).toEqual([1, 2, 3, 4]);
  });

  it('drops events it already holds and sorts an out-of-order batch', () => {
    // A replay after a reconnect overlaps what is held and arrives unsorted.
    const merged = mergeEvents([log(1), log(2), log(3)], [log(5), log(2, 'dup'), log(4), log(3, 'dup')]);
    expect(seqs(merged)).toEqual([1, 2, 3, 4, 5]);
    expect(merged.find((e) => e.seq === 2)!.data).toEqual({ level: 'info', message: 'm2' });
  });

  it('de-duplicates within one batch', () => {
    expect(seqs(mergeEvents([], [log(7), log(7), log(8)]))).toEqual([7, 8]);
  });

  it('keeps only the newest `cap` events', () => {
    const existing = Array.from({ length: 500 }, (_, i) => log(i + 1));
    const merged = mergeEvents(existing, [log(501), log(502)], 500);
    expect(merged).toHaveLength(500);
    expect(merged[0]!.seq).toBe(3);
    expect(merged[499]!.seq).toBe(502);
  });

  it('caps a single large replay too', () => {
    const replay = Array.from({ length: 2000 }, (_, i) => log(i + 1));
    expect(seqs(mergeEvents([], replay, 500))).toEqual(Array.from({ length: 500 }, (_, i) => 1501 + i));
  });

  it('does not mutate the list it was given', () => {
    const existing = [log(1)];
    mergeEvents(existing, [log(2)]);
    expect(existing).toHaveLength(1);
  });
});

describe('lastSeq', () => {
  it('is the highest seq, or `after` when the batch is older or empty', () => {
    expect(lastSeq([log(3), log(9), log(4)])).toBe(9);
    expect(lastSeq([], 12)).toBe(12);
    expect(lastSeq([log(3)], 12)).toBe(12);
  });
});

describe('parseEventMessage', () => {
  const wrap = (event: unknown) => JSON.stringify({ type: 'event', event });

  it('parses each kind', () => {
    expect(
      parseEventMessage(wrap({ seq: 1, kind: 'status', created_at: 't', data: { status: 'running', reason: '' } })),
    ).toEqual({ seq: 1, kind: 'status', created_at: 't', data: { status: 'running', reason: '' } });
    expect(
      parseEventMessage(wrap({ seq: 2, kind: 'metrics', created_at: 't', data: { step: 4, metrics: { a: 1 } } })),
    ).toEqual({ seq: 2, kind: 'metrics', created_at: 't', data: { step: 4, metrics: { a: 1 } } });
    expect(
      parseEventMessage(wrap({ seq: 3, kind: 'log', created_at: 't', data: { level: 'warning', message: 'x' } })),
    ).toEqual({ seq: 3, kind: 'log', created_at: 't', data: { level: 'warning', message: 'x' } });
  });

  it('fills missing optional fields and drops non-numeric metric values', () => {
    expect(parseEventMessage(wrap({ seq: 1, kind: 'status', data: { status: 'queued' } }))).toEqual({
      seq: 1,
      kind: 'status',
      created_at: '',
      data: { status: 'queued', reason: '' },
    });
    const m = parseEventMessage(wrap({ seq: 2, kind: 'metrics', data: { step: 1, metrics: { a: 'x', b: 2 } } }));
    expect(m?.data).toEqual({ step: 1, metrics: { b: 2 } });
  });

  it.each([
    ['not json', '{'],
    ['another message type', JSON.stringify({ type: 'ping' })],
    ['no seq', wrap({ kind: 'log', data: {} })],
    ['unknown kind', wrap({ seq: 1, kind: 'timeline', data: {} })],
    ['metrics without a step', wrap({ seq: 1, kind: 'metrics', data: { metrics: {} } })],
    ['data not an object', wrap({ seq: 1, kind: 'log', data: 'x' })],
  ])('ignores %s', (_label, text) => {
    expect(parseEventMessage(text)).toBeNull();
  });
});
