import { describe, expect, it } from 'vitest';
import { buildColumns, logDistr, nearestValue, pointCount, zoomRange, type ChartLine } from './chartData';
import { runningTotal } from './xAxis';

const line = (id: string, points: [number, number][], extra: Partial<ChartLine> = {}): ChartLine => ({
  id,
  label: id,
  color: '#000',
  points,
  ...extra,
});

describe('buildColumns', () => {
  it('gives one line raw and smoothed columns on the step axis', () => {
    const [xs, raw, smooth] = buildColumns([line('a', [[1, 10], [2, 0], [3, 0]])], 'step', 0.5);
    expect(xs).toEqual([1, 2, 3]);
    expect(raw).toEqual([10, 0, 0]);
    expect(smooth![0]).toBeCloseTo(10);
    expect(smooth![2]!).toBeGreaterThan(0); // still coming down from 10
  });

  it('repeats the raw column when smoothing is off', () => {
    const [, raw, smooth] = buildColumns([line('a', [[1, 1], [2, 5]])], 'step', 0);
    expect(smooth).toEqual(raw);
  });

  it("puts each job on its own clock's wall time, aligned on one x array", () => {
    const fast = line('fast', [[1, 0.1], [2, 0.2]], { clocks: { wall: runningTotal([[1, 10], [2, 10]]) } });
    const slow = line('slow', [[1, 0.3], [2, 0.4]], { clocks: { wall: runningTotal([[1, 15], [2, 15]]) } });
    const [xs, fastRaw, , slowRaw] = buildColumns([fast, slow], 'wall', 0);
    expect(xs).toEqual([10, 15, 20, 30]);
    expect(fastRaw).toEqual([0.1, null, 0.2, null]);
    expect(slowRaw).toEqual([null, 0.3, null, 0.4]);
  });

  it('falls back to steps for a job without the chosen clock', () => {
    const [xs] = buildColumns([line('a', [[5, 1], [6, 2]])], 'tokens', 0);
    expect(xs).toEqual([5, 6]);
  });
});

describe('logDistr', () => {
  it('is a logarithm for positive values and arcsinh once one is zero or negative', () => {
    expect(logDistr([[1, null, 2e-5]])).toBe(3);
    expect(logDistr([[1, 2], [0.5, 0]])).toBe(4);
    expect(logDistr([[-1]])).toBe(4);
  });
});

describe('pointCount', () => {
  it('adds up the points of every line', () => {
    expect(pointCount([line('a', [[1, 1], [2, 2]]), line('b', [[1, 3]])])).toBe(3);
  });
});

describe('nearestValue', () => {
  it("takes the index's own value, else the closest present one", () => {
    expect(nearestValue([1, null, 3], 0)).toBe(1);
    expect(nearestValue([null, null, 3], 0)).toBe(3);
    expect(nearestValue([5, null, null, null], 3)).toBe(5);
    expect(nearestValue([null, null], 0)).toBeNull();
    expect(nearestValue([1, null, null, null], 3, 1)).toBeNull();
  });
});

describe('zoomRange', () => {
  it('halves the range around the centre and stays inside the data', () => {
    expect(zoomRange({ min: 0, max: 100 }, 50, 0.5, 0, 100)).toEqual({ min: 25, max: 75 });
    expect(zoomRange({ min: 0, max: 100 }, 5, 0.5, 0, 100)).toEqual({ min: 0, max: 50 });
    expect(zoomRange({ min: 0, max: 100 }, 99, 0.5, 0, 100)).toEqual({ min: 50, max: 100 });
  });
  it('is null (the whole extent) once zooming out reaches it', () => {
    expect(zoomRange({ min: 25, max: 75 }, 50, 2, 0, 100)).toBeNull();
    expect(zoomRange({ min: 40, max: 60 }, 50, 2, 0, 100)).toEqual({ min: 30, max: 70 });
  });
});
