import type { Point } from '../api/types';

/** Most points a chart draws; a series longer than this is downsampled first. */
export const MAX_CHART_POINTS = 1000;

/**
 * Reduce a series to at most `maxPoints` points while keeping its shape: the first and
 * last points are kept, and the points in between are split into equal index buckets
 * of which only the lowest and the highest value survive, in their original order.
 * Unlike averaging or taking every k-th point, this never hides a spike or a dip
 * (a loss blow-up, a throughput stall), which is what a training chart is read for.
 *
 * `points` must be sorted by x; the result is a subsequence of it (no new points).
 * O(n) time. Series already short enough are returned as a copy, unchanged.
 */
export function downsampleMinMax(points: readonly Point[], maxPoints = MAX_CHART_POINTS): Point[] {
  if (!Number.isInteger(maxPoints) || maxPoints < 2) {
    throw new RangeError(`maxPoints must be an integer >= 2, got ${maxPoints}`);
  }
  const n = points.length;
  if (n <= maxPoints) return points.slice();

  // Two points per bucket plus the two ends never exceeds maxPoints.
  const buckets = Math.floor((maxPoints - 2) / 2);
  const inner = n - 2; // points strictly between the first and the last
  const out: Point[] = [points[0]!];
  for (let b = 0; b < buckets; b++) {
    const start = 1 + Math.floor((b * inner) / buckets);
    const end = 1 + Math.floor(((b + 1) * inner) / buckets);
    if (start >= end) continue;
    let minIdx = start;
    let maxIdx = start;
    for (let i = start + 1; i < end; i++) {
      const v = points[i]![1];
      if (v < points[minIdx]![1]) minIdx = i;
      if (v > points[maxIdx]![1]) maxIdx = i;
    }
    if (minIdx === maxIdx) {
      out.push(points[minIdx]!);
    } else {
      out.push(points[Math.min(minIdx, maxIdx)]!, points[Math.max(minIdx, maxIdx)]!);
    }
  }
  out.push(points[n - 1]!);
  return out;
}
