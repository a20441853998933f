import { orderMetricNames } from './series';

/** verl's metric families, in the order a reader looks at them; others follow alphabetically. */
export const KNOWN_GROUPS = ['critic', 'actor', 'response_length', 'timing_s', 'perf', 'val-core'];
/** The group of a metric whose name has no prefix. */
export const OTHER_GROUP = 'other';

export interface MetricGroup {
  /** The prefix before the first "/" (`critic/score/mean` -> `critic`). */
  name: string;
  /** The group's metrics that pass the filter, in reading order. */
  metrics: string[];
  /** How many metrics the group has before filtering. */
  total: number;
}

export function metricGroup(metricName: string): string {
  const slash = metricName.indexOf('/');
  return slash > 0 ? metricName.slice(0, slash) : OTHER_GROUP;
}

/**
 * Whether a metric passes the filter box: every whitespace-separated term must occur in
 * the name, ignoring case (`score mean` finds `critic/score/mean`). An empty filter passes all.
 */
export function matchesFilter(metricName: string, filter: string): boolean {
  const name = metricName.toLowerCase();
  return filter
    .toLowerCase()
    .split(/\s+/)
    .every((term) => term === '' || name.includes(term));
}

/**
 * The metrics split into groups by prefix: known groups first in their order, then the rest
 * alphabetically, `other` last. Groups left empty by the filter are dropped.
 */
export function groupMetrics(names: Iterable<string>, filter = ''): MetricGroup[] {
  const byGroup = new Map<string, string[]>();
  for (const name of names) {
    const group = metricGroup(name);
    let list = byGroup.get(group);
    if (!list) byGroup.set(group, (list = []));
    list.push(name);
  }
  const rank = (group: string): number => {
    if (group === OTHER_GROUP) return KNOWN_GROUPS.length + 1;
    const i = KNOWN_GROUPS.indexOf(group);
    return i < 0 ? KNOWN_GROUPS.length : i;
  };
  return Array.from(byGroup.keys())
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((name) => {
      const all = byGroup.get(name)!;
      return { name, metrics: orderMetricNames(all.filter((m) => matchesFilter(m, filter))), total: all.length };
    })
    .filter((g) => g.metrics.length > 0);
}
