import { describe, expect, it } from 'vitest';
import { emaSmooth, MAX_SMOOTHING } from './ema';

describe('emaSmooth', () => {
  it('returns the values unchanged (as a copy) at weight 0', () => {
    const values = [1, 5, null, 2];
    const out = emaSmooth(values, 0);
    expect(out).toEqual(values);
    expect(out).not.toBe(values);
  });

  it('starts on the first value (debiased) and follows a step change gradually', () => {
    const out = emaSmooth([10, 10, 0, 0, 0], 0.5) as number[];
    expect(out[0]).toBeCloseTo(10);
    expect(out[1]).toBeCloseTo(10);
    // 0.5-weighted: the drop is halved each step, never overshooting.
    expect(out[2]).toBeGreaterThan(0);
    expect(out[2]).toBeLessThan(10);
    expect(out[3]!).toBeLessThan(out[2]!);
    expect(out[4]!).toBeLessThan(out[3]!);
    // By hand: avg = 0.5*avg + 0.5*v; debias 1 - 0.5^n. Step 3: avg 3.75 / 0.875.
    expect(out[2]).toBeCloseTo(3.75 / 0.875);
  });

  it('flattens noise: a smoothed alternating series varies far less than the raw one', () => {
    const raw = Array.from({ length: 200 }, (_, i) => (i % 2 ? 1 : -1));
    const smooth = emaSmooth(raw, 0.9) as number[];
    const tail = smooth.slice(100);
    expect(Math.max(...tail) - Math.min(...tail)).toBeLessThan(0.2);
  });

  it('keeps gaps as gaps and carries the average across them', () => {
    const out = emaSmooth([4, null, 4], 0.9);
    expect(out[1]).toBeNull();
    expect(out[2]).toBeCloseTo(4);
  });

  it('rejects a weight outside the slider range', () => {
    expect(() => emaSmooth([1], 1)).toThrow(RangeError);
    expect(() => emaSmooth([1], -0.1)).toThrow(RangeError);
    expect(() => emaSmooth([1], Number.NaN)).toThrow(RangeError);
    expect(() => emaSmooth([1], MAX_SMOOTHING)).not.toThrow();
  });
});
