import { describe, expect, it } from 'vitest';
import { assignColors, lineColor, LINE_COLORS, metricsPresent } from './compare';

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

describe('assignColors', () => {
  it('gives new jobs the lowest free colours, in order', () => {
    expect(assignColors(['a', 'b', 'c'], {})).toEqual({ a: 0, b: 1, c: 2 });
  });

  it("keeps a job's colour when another is removed, and reuses the freed one for a newcomer", () => {
    const first = assignColors(['a', 'b', 'c'], {});
    const removed = assignColors(['a', 'c'], first);
    expect([removed.a, removed.c]).toEqual([0, 2]);
    const added = assignColors(['a', 'c', 'd'], removed);
    expect(added.d).toBe(1);
  });

  it('gives a job back its old colour when it returns and the colour is free', () => {
    const first = assignColors(['a', 'b'], {});
    const back = assignColors(['b', 'a'], assignColors(['b'], first));
    expect([back.a, back.b]).toEqual([0, 1]);
  });

  it('resolves two remembered jobs that want the same colour', () => {
    // 'x' had 0 before it was removed; 'y' took 0 since. Both back: y keeps 0, x moves.
    const out = assignColors(['y', 'x'], { x: 0, y: 0 });
    expect(out.y).toBe(0);
    expect(out.x).toBe(1);
  });
});
