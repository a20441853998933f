// Pure helpers for the compare page.

import type { Point } from '../../api/types';
import { orderMetricNames } from '../../charts/series';

/** The metrics the compare page asks for, in the order it offers them. */
export const COMPARE_METRICS = ['critic/score/mean', 'response_length/mean', 'perf/throughput', 'timing_s/step'];
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
