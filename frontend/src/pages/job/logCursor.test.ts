import { describe, expect, it } from 'vitest';
import type { LogLine } from '../../api/types';
import { EMPTY_LOGS, SERVER_LOG_PAGE, applyLogPage, hasMore } from './logCursor';

const line = (seq: number, message = `m${seq}`): LogLine => ({
  seq,
  created_at: '2025-01-01T00:00:00Z',
  level: 'info',
  message,
});

describe('applyLogPage', () => {
  it('appends lines and moves the cursor to next_after', () => {
    const s = applyLogPage(EMPTY_LOGS, { results: [line(3), line(7)], next_after: 7 });
    expect(s.lines.map((l) => l.seq)).toEqual([3, 7]);
    expect(s.cursor).toBe(7);
    const t = applyLogPage(s, { results: [line(9)], next_after: 9 });
    expect(t.lines.map((l) => l.seq)).toEqual([3, 7, 9]);
    expect(t.cursor).toBe(9);
  });

  it('keeps the cursor on an empty page and returns the same state', () => {
    const s = applyLogPage(EMPTY_LOGS, { results: [line(3)], next_after: 3 });
    expect(applyLogPage(s, { results: [], next_after: null })).toBe(s);
  });

  it('ignores lines at or before the cursor (an overlapping request) and duplicates', () => {
    const s = applyLogPage(EMPTY_LOGS, { results: [line(3), line(5)], next_after: 5 });
    const again = applyLogPage(s, { results: [line(3), line(5)], next_after: 5 });
    expect(again).toBe(s);
    const mixed = applyLogPage(s, { results: [line(5), line(8), line(6), line(8)], next_after: 8 });
    expect(mixed.lines.map((l) => l.seq)).toEqual([3, 5, 6, 8]);
  });

  it('never moves the cursor backwards', () => {
    const s = applyLogPage(EMPTY_LOGS, { results: [line(10)], next_after: 10 });
    expect(applyLogPage(s, { results: [], next_after: 4 }).cursor).toBe(10);
  });

  it('drops the oldest lines past the cap and counts them', () => {
    let s = applyLogPage(EMPTY_LOGS, { results: [1, 2, 3].map((n) => line(n)), next_after: 3 }, 4);
    s = applyLogPage(s, { results: [4, 5, 6].map((n) => line(n)), next_after: 6 }, 4);
    expect(s.lines.map((l) => l.seq)).toEqual([3, 4, 5, 6]);
    expect(s.dropped).toBe(2);
    expect(s.cursor).toBe(6);
  });
});

describe('hasMore', () => {
  it('is true only for a full page', () => {
    const full = Array.from({ length: SERVER_LOG_PAGE }, (_, i) => line(i + 1));
    expect(hasMore({ results: full, next_after: SERVER_LOG_PAGE })).toBe(true);
    expect(hasMore({ results: [line(1)], next_after: 1 })).toBe(false);
    expect(hasMore({ results: [], next_after: null })).toBe(false);
  });
});
