import { describe, expect, it } from 'vitest';
import { describeHistogram, histogram } from './histogram';

describe('histogram', () => {
  it('gives each of a few exact values its own bin, in order', () => {
    const h = histogram([1, 0, 1, 0.5, 1]);
    expect(h.bins.map((b) => [b.label, b.count])).toEqual([
      ['0', 1],
      ['0.5', 1],
      ['1', 3],
    ]);
    expect(h.total).toBe(5);
  });

  it('splits many values into equal-width bins, the greatest in the last', () => {
    const h = histogram([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 5);
    expect(h.bins.map((b) => b.count)).toEqual([2, 2, 2, 2, 3]);
    expect(h.bins[0]?.label).toBe('0–2');
    expect(h.bins[4]?.hi).toBe(10);
    expect(h.bins.reduce((n, b) => n + b.count, 0)).toBe(11);
  });

  it('leaves out values that are not finite and says how many', () => {
    const h = histogram([1, Number.NaN, Infinity, 1]);
    expect(h).toMatchObject({ total: 2, skipped: 2 });
    expect(h.bins).toHaveLength(1);
  });

  it('has no bins for no values and refuses a bin count that is not positive', () => {
    expect(histogram([]).bins).toEqual([]);
    expect(() => histogram([1], 0)).toThrow(/maxBins must be a positive integer/);
  });
});

describe('describeHistogram', () => {
  it('lists the bins that hold values', () => {
    expect(describeHistogram(histogram([0, 0, 1]))).toBe('0: 2, 1: 1');
    expect(describeHistogram(histogram([]))).toBe('no values');
  });
});
