import { describe, expect, it } from 'vitest';
import type { VerlEstimate } from '../../api/types';
import { effectiveMfu, formatSpeedup, meanValue, verlExplanation } from './efficiency';
import { formatSeconds } from './timeline';

const PEAK = 1e15;

describe('effectiveMfu', () => {
  it('spreads a step over its own time and divides by the whole cluster at peak', () => {
    // 2 devices, 10 s window in 2 slices; a step from 0 to 10 s doing 4e15 FLOPs:
    // 2e15 per 5 s slice, against 5 s x 2 devices x 1e15 = 1e16 possible.
    const points = effectiveMfu([{ start_s: 0, end_s: 10, flops: 4e15 }], 2, PEAK, 0, 10, 2);
    expect(points.map((p) => p.t)).toEqual([2.5, 7.5]);
    expect(points[0]!.value).toBeCloseTo(0.2);
    expect(points[1]!.value).toBeCloseTo(0.2);
  });

  it('counts only the part of a step inside the window and adds overlapping steps', () => {
    const steps = [
      { start_s: -10, end_s: 10, flops: 4e15 }, // half of it (2e15) before the window
      { start_s: 5, end_s: 10, flops: 1e15 },
    ];
    const points = effectiveMfu(steps, 1, PEAK, 0, 10, 2);
    expect(points[0]!.value).toBeCloseTo(1e15 / 5e15);
    expect(points[1]!.value).toBeCloseTo(2e15 / 5e15);
  });

  it('is empty without devices, a peak or a window, and never above 1', () => {
    expect(effectiveMfu([], 0, PEAK, 0, 10)).toEqual([]);
    expect(effectiveMfu([], 1, 0, 0, 10)).toEqual([]);
    expect(effectiveMfu([], 1, PEAK, 10, 10)).toEqual([]);
    const over = effectiveMfu([{ start_s: 0, end_s: 1, flops: 1e18 }], 1, PEAK, 0, 1, 1);
    expect(over[0]!.value).toBe(1);
  });
});

describe('verl readout', () => {
  const estimate: VerlEstimate = {
    speedup: 1.3125,
    actual_s: 80,
    verl_s: 105,
    verl_dedicated_s: 105,
    verl_serial_s: 140,
    steps: 6,
    tokens: 1000,
    note: null,
  };

  it('formats the ratio and says it is an estimate and how it was made', () => {
    expect(formatSpeedup(1.3125)).toBe('1.31×');
    expect(formatSpeedup(null)).toBe('—');
    const text = verlExplanation(estimate, formatSeconds);
    expect(text).toMatch(/^Estimated, not measured/);
    expect(text).toContain('These 6 steps took 1 min 20 s');
    expect(text).toContain('about 1 min 45 s');
    expect(text).toContain('whole cluster 2 min 20 s');
  });

  it('gives the reason when there is no estimate', () => {
    const none = { ...estimate, speedup: null, steps: 0, note: 'no step finished in this window' };
    expect(verlExplanation(none, formatSeconds)).toMatch(/no step finished in this window$/);
  });

  it('averages a series', () => {
    expect(meanValue([])).toBe(0);
    expect(meanValue([{ t: 0, value: 0.2 }, { t: 1, value: 0.4 }])).toBeCloseTo(0.3);
  });
});
