import { describe, expect, it } from 'vitest';
import type { Point } from '../api/types';
import { downsampleMinMax, MAX_CHART_POINTS } from './downsample';

function series(n: number, f: (i: number) => number): Point[] {
  return Array.from({ length: n }, (_, i): Point => [i, f(i)]);
}

describe('downsampleMinMax', () => {
  it('returns a short series unchanged (as a copy)', () => {
    const points = series(10, (i) => i * i);
    const out = downsampleMinMax(points, 10);
    expect(out).toEqual(points);
    expect(out).not.toBe(points);
  });

  it.each([
    [5_000, 1000],
    [1_001, 1000],
    [100_000, 1000],
    [1_000_000, 1000],
    [37, 4],
    [37, 5],
    [37, 3],
    [37, 2],
  ])('reduces %i points to at most %i', (n, max) => {
    const out = downsampleMinMax(series(n, (i) => Math.sin(i / 7)), max);
    expect(out.length).toBeLessThanOrEqual(max);
    // 1000 -> 499 buckets of 2 + both ends = 1000: the budget is used, not wasted.
    if (max === 1000) expect(out.length).toBe(1000);
  });

  it('keeps the first and the last point', () => {
    const points = series(10_000, (i) => i % 13);
    const out = downsampleMinMax(points, 100);
    expect(out[0]).toEqual([0, 0]);
    expect(out[out.length - 1]).toEqual(points[points.length - 1]);
  });

  it('keeps a one-step spike and a one-step dip that averaging would hide', () => {
    // A flat loss of 1.0 over 50,000 steps with a blow-up at step 31,337 and a
    // dip at step 7: each sits alone in a bucket of ~100 points and must survive.
    const points = series(50_000, (i) => (i === 31_337 ? 250 : i === 7 ? -3 : 1));
    const out = downsampleMinMax(points, MAX_CHART_POINTS);
    expect(out).toContainEqual([31_337, 250]);
    expect(out).toContainEqual([7, -3]);
  });

  it('returns a subsequence of the input in increasing step order', () => {
    const points = series(20_000, (i) => Math.cos(i) * i);
    const out = downsampleMinMax(points, 300);
    const index = new Map(points.map((p, i) => [p, i]));
    let prev = -1;
    for (const p of out) {
      const i = index.get(p);
      expect(i).toBeDefined(); // the very same point objects, not new ones
      expect(i!).toBeGreaterThan(prev);
      prev = i!;
    }
  });

  it('emits one point for a bucket whose min and max coincide (a flat run)', () => {
    // 2 ends + 8 interior points in 4 buckets of 2; each bucket is flat -> 1 point each.
    const out = downsampleMinMax(series(10, () => 5), 9);
    expect(out.length).toBe(2 + 3);
  });

  it('handles non-uniform steps', () => {
    const points: Point[] = Array.from({ length: 3000 }, (_, i): Point => [i * i, i % 2]);
    const out = downsampleMinMax(points, 1000);
    expect(out.length).toBeLessThanOrEqual(1000);
    expect(out.some(([, v]) => v === 0)).toBe(true);
    expect(out.some(([, v]) => v === 1)).toBe(true);
  });

  it('rejects a budget that cannot hold both ends', () => {
    expect(() => downsampleMinMax(series(10, (i) => i), 1)).toThrow(RangeError);
    expect(() => downsampleMinMax(series(10, (i) => i), 2.5)).toThrow(RangeError);
  });
});
