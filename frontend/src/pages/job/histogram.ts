// Binning for the samples panel's per-step distributions (rewards, completion lengths).

export interface HistogramBin {
  /** Lower and upper edge; equal for a bin that holds one exact value. */
  lo: number;
  hi: number;
  count: number;
  label: string;
}

export interface Histogram {
  bins: HistogramBin[];
  /** Finite values counted. */
  total: number;
  /** Values left out because they were not finite numbers (NaN, ±Infinity). */
  skipped: number;
}

/** An edge for display: at most two decimals ("0.5", "12", "-0.25"). */
export function formatEdge(x: number): string {
  return String(Number(x.toFixed(2)));
}

/**
 * Counts per bin. Rewards are often a handful of exact values (0 and 1), so when there are at
 * most `maxBins` distinct values each gets its own bin; otherwise `maxBins` equal-width bins
 * from the least to the greatest value (the greatest falls in the last bin).
 */
export function histogram(values: readonly number[], maxBins = 10): Histogram {
  if (!Number.isInteger(maxBins) || maxBins < 1) throw new RangeError(`maxBins must be a positive integer, got ${maxBins}`);
  const finite = values.filter((v) => Number.isFinite(v));
  const skipped = values.length - finite.length;
  if (finite.length === 0) return { bins: [], total: 0, skipped };

  const counts = new Map<number, number>();
  for (const v of finite) counts.set(v, (counts.get(v) ?? 0) + 1);
  const distinct = [...counts.keys()].sort((a, b) => a - b);
  if (distinct.length <= maxBins) {
    const bins = distinct.map((v): HistogramBin => ({ lo: v, hi: v, count: counts.get(v) ?? 0, label: formatEdge(v) }));
    return { bins, total: finite.length, skipped };
  }

  const min = Math.min(...distinct);
  const max = Math.max(...distinct);
  const width = (max - min) / maxBins;
  const bins: HistogramBin[] = Array.from({ length: maxBins }, (_, i) => {
    const lo = min + i * width;
    const hi = i === maxBins - 1 ? max : min + (i + 1) * width;
    return { lo, hi, count: 0, label: `${formatEdge(lo)}–${formatEdge(hi)}` };
  });
  for (const v of finite) {
    const bin = bins[Math.min(Math.floor((v - min) / width), maxBins - 1)];
    if (bin) bin.count += 1;
  }
  return { bins, total: finite.length, skipped };
}

/** The text alternative of a histogram: "0: 3, 1: 1" (empty bins left out). */
export function describeHistogram(h: Histogram): string {
  const parts = h.bins.filter((b) => b.count > 0).map((b) => `${b.label}: ${b.count}`);
  return parts.length ? parts.join(', ') : 'no values';
}
