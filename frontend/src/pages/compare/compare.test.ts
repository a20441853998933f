import { describe, expect, it } from 'vitest';
import { lineColor, LINE_COLORS, metricsPresent } from './compare';

describe('metricsPresent', () => {
  it('lists metrics with data in any job, preferred first', () => {
    expect(
      metricsPresent([
        { 'timing_s/step': [[1, 2]], 'critic/score/mean': [] },
        undefined,
        { 'perf/throughput': [[1, 5]], 'critic/score/mean': [[1, 0.5]] },
      ]),
    ).toEqual(['critic/score/mean', 'perf/throughput', 'timing_s/step']);
    expect(metricsPresent([])).toEqual([]);
  });
});

describe('lineColor', () => {
  it('gives each of the first jobs its own colour', () => {
    expect(new Set(LINE_COLORS.map((_, i) => lineColor(i))).size).toBe(LINE_COLORS.length);
    expect(lineColor(LINE_COLORS.length)).toBe(lineColor(0));
  });
});
