import type { Point } from '../api/types';

/**
 * "Nice" axis ticks (steps of 1, 2 or 5 times a power of ten) covering [min, max],
 * about `count` of them. A flat series (min == max) gets a band around its value.
 */
export function niceTicks(min: number, max: number, count = 4): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min > max) [min, max] = [max, min];
  if (min === max) {
    const pad = Math.abs(min) * 0.1 || 1;
    min -= pad;
    max += pad;
  }
  const rough = (max - min) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const residual = rough / magnitude;
  // The thresholds d3 uses: pick the round step nearest (geometrically) to the rough one.
  const step = (residual >= 7.07 ? 10 : residual >= 3.16 ? 5 : residual >= 1.41 ? 2 : 1) * magnitude;
  const first = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let v = first; v <= max + step * 1e-9; v += step) {
    ticks.push(Number(v.toPrecision(12))); // drop float noise such as 0.30000000000000004
  }
  if (ticks[ticks.length - 1]! < max) ticks.push(Number((first + ticks.length * step).toPrecision(12)));
  return ticks;
}

/** Index of the point whose x is closest to `x`, in points sorted by x; -1 if empty. */
export function nearestIndex(points: readonly Point[], x: number): number {
  if (points.length === 0) return -1;
  let lo = 0;
  let hi = points.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid]![0] < x) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && x - points[lo - 1]![0] <= points[lo]![0] - x) return lo - 1;
  return lo;
}
