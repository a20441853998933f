import { describe, expect, it } from 'vitest';
import type { JobEvent, Point } from '../api/types';
import {
  applyMetricEvents,
  chartTestId,
  metricUnit,
  mergePoints,
  mergeSeriesMaps,
  normalizeSeries,
  orderMetricNames,
} from './series';

function metrics(seq: number, step: number, values: Record<string, number>): JobEvent {
  return { seq, kind: 'metrics', created_at: '2025-01-01T00:00:00Z', data: { step, metrics: values } };
}

describe('mergePoints', () => {
  it('appends newer steps', () => {
    expect(mergePoints([[1, 10]], [[2, 20], [3, 30]])).toEqual([[1, 10], [2, 20], [3, 30]]);
  });

  it('keeps one point per step, the later value winning, in step order', () => {
    const merged = mergePoints(
      [[1, 10], [2, 20], [4, 40]],
      [[2, 21], [3, 30]],
    );
    expect(merged).toEqual([[1, 10], [2, 21], [3, 30], [4, 40]]);
  });

  it('does not mutate its inputs', () => {
    const a: Point[] = [[1, 1]];
    const b: Point[] = [[1, 2]];
    mergePoints(a, b);
    expect(a).toEqual([[1, 1]]);
    expect(b).toEqual([[1, 2]]);
  });
});

describe('normalizeSeries', () => {
  it('sorts, drops malformed and non-finite points, and de-duplicates steps', () => {
    const out = normalizeSeries({
      'perf/throughput': [[3, 30], [1, 10], [2, null], ['x', 1], [2, 20], [1, 11]],
      'timing_s/step': 'not a list',
    });
    // Stable sort keeps [1,10] before [1,11]; the later one wins.
    expect(out).toEqual({ 'perf/throughput': [[1, 11], [2, 20], [3, 30]] });
  });

  it('accepts an empty or missing payload', () => {
    expect(normalizeSeries(undefined)).toEqual({});
    expect(normalizeSeries({})).toEqual({});
  });
});

describe('applyMetricEvents', () => {
  it('adds each metric of each metrics event to its own series', () => {
    const out = applyMetricEvents({}, [
      metrics(1, 0, { 'perf/throughput': 100, 'timing_s/step': 2 }),
      metrics(2, 1, { 'perf/throughput': 110 }),
    ]);
    expect(out).toEqual({
      'perf/throughput': [[0, 100], [1, 110]],
      'timing_s/step': [[0, 2]],
    });
  });

  it('leaves untouched series and an unchanged map identical (cheap re-render)', () => {
    const throughput: Point[] = [[0, 1]];
    const latency: Point[] = [[0, 2]];
    const before = { 'perf/throughput': throughput, 'timing_s/step': latency };
    const after = applyMetricEvents(before, [metrics(5, 1, { 'perf/throughput': 3 })]);
    expect(after['timing_s/step']).toBe(latency);
    expect(after['perf/throughput']).toEqual([[0, 1], [1, 3]]);

    const statusOnly: JobEvent = {
      seq: 6,
      kind: 'status',
      created_at: '',
      data: { status: 'running', reason: '' },
    };
    expect(applyMetricEvents(after, [statusOnly])).toBe(after);
  });

  it('replaces a re-reported step instead of drawing it twice', () => {
    const out = applyMetricEvents({ m: [[0, 1], [1, 2]] }, [
      metrics(9, 1, { m: 5 }),
      metrics(10, 1, { m: 6 }),
    ]);
    expect(out.m).toEqual([[0, 1], [1, 6]]);
  });

  it('skips non-finite values', () => {
    const out = applyMetricEvents({}, [metrics(1, 0, { m: Number.NaN, n: Infinity, k: 1 })]);
    expect(Object.keys(out)).toEqual(['k']);
  });
});

describe('mergeSeriesMaps', () => {
  it('merges fetched history under live points that arrived first', () => {
    const history = { a: [[0, 1], [1, 2]] as Point[], b: [[0, 9]] as Point[] };
    const live = { a: [[1, 2.5], [2, 3]] as Point[], c: [[4, 4]] as Point[] };
    expect(mergeSeriesMaps(history, live)).toEqual({
      a: [[0, 1], [1, 2.5], [2, 3]],
      b: [[0, 9]],
      c: [[4, 4]],
    });
  });
});

describe('chart naming', () => {
  it('builds test ids with "/" replaced by "_"', () => {
    expect(chartTestId('perf/throughput')).toBe('chart-perf_throughput');
    expect(chartTestId('critic/score/mean')).toBe('chart-critic_score_mean');
  });

  it('orders known metrics first, then the rest alphabetically', () => {
    expect(
      orderMetricNames(['zeta', 'perf/gpu_util', 'alpha', 'timing_s/step', 'critic/score/mean']),
    ).toEqual(['critic/score/mean', 'timing_s/step', 'perf/gpu_util', 'alpha', 'zeta']);
  });
});

describe('metricUnit', () => {
  it('labels verl metrics with their real units', () => {
    expect(metricUnit('perf/throughput')).toBe('tokens/s per GPU');
    expect(metricUnit('response_length/clip_ratio')).toBe('fraction');
    expect(metricUnit('response_length/mean')).toBe('tokens');
    expect(metricUnit('timing_s/gen')).toBe('s');
    expect(metricUnit('perf/mfu')).toBe('');
  });
});
