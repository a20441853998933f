import { describe, expect, it } from 'vitest';
import type { JobEvent } from '../../api/types';
import { keepLatestProgress, progressFromEvents } from './progress';

const at = '2025-01-01T00:00:00Z';
const metrics = (seq: number, step: number): JobEvent => ({
  seq,
  created_at: at,
  kind: 'metrics',
  data: { step, metrics: {} },
});
const status = (seq: number): JobEvent => ({
  seq,
  created_at: at,
  kind: 'status',
  data: { status: 'running', reason: '' },
});

describe('progressFromEvents', () => {
  it('takes the highest metrics step', () => {
    const batch = [metrics(5, 3), status(6), metrics(7, 5), metrics(8, 4)];
    expect(progressFromEvents({ step: 2, total_steps: 12 }, batch)).toEqual({ step: 5, total_steps: 12 });
  });
  it('returns the same object when nothing moved (a replay of older steps)', () => {
    const p = { step: 9, total_steps: 12 };
    expect(progressFromEvents(p, [metrics(1, 3), status(2)])).toBe(p);
    expect(progressFromEvents(p, [])).toBe(p);
  });
});

describe('keepLatestProgress', () => {
  it('never moves the step back, and takes the fetched total', () => {
    expect(keepLatestProgress({ step: 7, total_steps: 12 }, { step: 6, total_steps: 12 })).toEqual({
      step: 7,
      total_steps: 12,
    });
    expect(keepLatestProgress({ step: 7, total_steps: 12 }, { step: 8, total_steps: 20 })).toEqual({
      step: 8,
      total_steps: 20,
    });
  });
});
