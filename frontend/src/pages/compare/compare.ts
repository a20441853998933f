// Pure helpers for the compare page.

import type { Point } from '../../api/types';
import { orderMetricNames } from '../../charts/series';

/** Points per series per job (downsampled on the server): several jobs share one chart. */
export const COMPARE_MAX_POINTS = 500;

/** Colour-blind-safe line colours (Okabe–Ito, then two more); one per compared job. */
export const LINE_COLORS = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#6b4c9a', '#3d3d3d'];

export function lineColor(index: number): string {
  return LINE_COLORS[index % LINE_COLORS.length]!;
}

/** The metric names with at least one point in any job's series, preferred ones first. */
export function metricsPresent(seriesByJob: Iterable<Record<string, readonly Point[]> | undefined>): string[] {
  const names = new Set<string>();
  for (const series of seriesByJob) {
    if (!series) continue;
    for (const [name, points] of Object.entries(series)) if (points.length > 0) names.add(name);
  }
  return orderMetricNames(names);
}

/**
 * Each job's colour index, kept for as long as the job is compared: removing a job frees its
 * colour without repainting the others, and a job added later takes the lowest free one (its
 * old one if free again). `previous` is the last answer; the result remembers removed jobs too.
 */
export function assignColors(ids: readonly string[], previous: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = { ...previous };
  const used = new Set<number>();
  const fresh: string[] = [];
  for (const id of ids) {
    const kept = previous[id];
    if (kept !== undefined && !used.has(kept)) used.add(kept);
    else fresh.push(id);
  }
  for (const id of fresh) {
    let index = 0;
    while (used.has(index)) index++;
    used.add(index);
    out[id] = index;
  }
  return out;
}
