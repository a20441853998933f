import { describe, expect, it } from 'vitest';
import type { Point } from '../api/types';
import { alignSeries, availableXAxes, clockAt, commonXAxes, formatX, jobClocks, runningTotal, xValues } from './xAxis';

describe('availableXAxes', () => {
  it('offers wall time and tokens only where their per-step source has points', () => {
    expect(availableXAxes({ 'critic/score/mean': [[1, 0.5]] })).toEqual(['step']);
    expect(availableXAxes({ 'timing_s/step': [[1, 2]], 'perf/total_num_tokens': [] })).toEqual(['step', 'wall']);
    expect(availableXAxes({ 'timing_s/step': [[1, 2]], 'perf/total_num_tokens': [[1, 100]] })).toEqual([
      'step',
      'wall',
      'tokens',
    ]);
  });
});

describe('runningTotal', () => {
  it('sums every step exactly when no step is missing', () => {
    expect(runningTotal([[1, 2], [2, 3], [3, 5]])).toEqual([[1, 2], [2, 5], [3, 10]]);
  });
  it('counts a downsampled point once for each step it stands for', () => {
    // Steps 1, 11, 21 of a run with a constant 2 s step: 2 s at step 1, then 20 s per gap.
    expect(runningTotal([[1, 2], [11, 2], [21, 2]])).toEqual([[1, 2], [11, 22], [21, 42]]);
  });
  it('is empty for an empty series', () => {
    expect(runningTotal([])).toEqual([]);
  });
});

describe('clockAt', () => {
  const clock: Point[] = [[1, 2], [11, 22], [21, 42]];
  it.each([
    [1, 2],
    [6, 12],
    [11, 22],
    [21, 42],
    [26, 52], // past the end: the last slope
    [0, 0], // before the start: the first slope
  ])('step %d -> %d', (step, total) => {
    expect(clockAt(clock, step)).toBeCloseTo(total);
  });
  it('is NaN without a clock and constant with one point', () => {
    expect(clockAt([], 3)).toBeNaN();
    expect(clockAt([[5, 9]], 100)).toBe(9);
  });
});

describe('xValues', () => {
  const points: Point[] = [[1, 0.1], [2, 0.2], [3, 0.3]];
  it('is the steps on the step axis or without a clock', () => {
    expect(xValues(points, 'step', [[1, 5]])).toEqual([1, 2, 3]);
    expect(xValues(points, 'wall', undefined)).toEqual([1, 2, 3]);
  });
  it("maps each step through the clock's running total", () => {
    expect(xValues(points, 'wall', runningTotal([[1, 10], [2, 10], [3, 30]]))).toEqual([10, 20, 50]);
  });
});

describe('alignSeries', () => {
  it('returns one sorted series as it is', () => {
    expect(alignSeries([{ xs: [1, 2, 3], ys: [5, 6, 7] }])).toEqual([[1, 2, 3], [5, 6, 7]]);
  });
  it('puts several series on the union of their x values, null where one has none', () => {
    expect(
      alignSeries([
        { xs: [1, 3], ys: [10, 30] },
        { xs: [2, 3, 4], ys: [20, 31, 40] },
        { xs: [], ys: [] },
      ]),
    ).toEqual([
      [1, 2, 3, 4],
      [10, null, 30, null],
      [null, 20, 31, 40],
      [null, null, null, null],
    ]);
  });
});

describe('formatX', () => {
  it.each([
    [1234, 'step', '1234'],
    [42.4, 'wall', '42s'],
    [125, 'wall', '2m 05s'],
    [3900, 'wall', '1h 05m'],
    [950, 'tokens', '950'],
    [1500, 'tokens', '1.5k'],
    [1_234_567, 'tokens', '1.23M'],
    [2e9, 'tokens', '2B'],
  ] as const)('%d on the %s axis -> %s', (value, mode, text) => {
    expect(formatX(value, mode)).toBe(text);
  });
});

describe('jobClocks', () => {
  it('has a running total for each axis whose source the job reports', () => {
    const clocks = jobClocks({ 'timing_s/step': [[1, 2], [2, 3]], 'critic/score/mean': [[1, 0]] });
    expect(clocks).toEqual({ wall: [[1, 2], [2, 5]] });
  });
});

describe('commonXAxes', () => {
  it('offers only the axes every job can be drawn against', () => {
    const timed = { 'timing_s/step': [[1, 2]] as [number, number][] };
    const both = { ...timed, 'perf/total_num_tokens': [[1, 9]] as [number, number][] };
    expect(commonXAxes([both, timed])).toEqual(['step', 'wall']);
    expect(commonXAxes([both, {}])).toEqual(['step']);
    expect(commonXAxes([])).toEqual(['step']);
  });
});
