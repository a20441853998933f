import { describe, expect, it } from 'vitest';
import { nearestIndex, niceTicks } from './scale';

describe('niceTicks', () => {
  it('covers the range with round steps', () => {
    // rough step (1 - 0) / 4 = 0.25 -> nearest round step 0.2
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    // rough step 94 / 4 = 23.5 -> 20; 0..100 covers 3..97
    const ticks = niceTicks(3, 97, 4);
    expect(ticks[0]).toBeLessThanOrEqual(3);
    expect(ticks[ticks.length - 1]).toBeGreaterThanOrEqual(97);
    expect(ticks).toEqual([0, 20, 40, 60, 80, 100]);
  });

  it('has no floating point noise', () => {
    for (const t of niceTicks(0.1, 0.7, 4)) expect(String(t).length).toBeLessThan(6);
  });

  it('widens a flat series into a band around its value', () => {
    const ticks = niceTicks(5, 5);
    expect(ticks[0]).toBeLessThan(5);
    expect(ticks[ticks.length - 1]).toBeGreaterThan(5);
  });

  it('returns nothing for non-finite bounds', () => {
    expect(niceTicks(Number.NaN, 1)).toEqual([]);
  });
});

describe('nearestIndex', () => {
  const points: [number, number][] = [[0, 0], [10, 0], [20, 0]];
  it.each([
    [-5, 0],
    [4, 0],
    [5, 0], // a tie goes to the earlier point
    [6, 1],
    [14, 1],
    [19, 2],
    [100, 2],
  ])('x=%d -> index %d', (x, expected) => {
    expect(nearestIndex(points, x)).toBe(expected);
  });

  it('is -1 for an empty series', () => {
    expect(nearestIndex([], 3)).toBe(-1);
  });
});
