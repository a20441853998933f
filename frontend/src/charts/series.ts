import type { JobEvent, Point } from '../api/types';

/** All series of one job, by metric name (e.g. "perf/throughput"). */
export type SeriesMap = Readonly<Record<string, readonly Point[]>>;

function isPoint(value: unknown): value is Point {
  return (
    Array.isArray(value) &&
    value.length >= 2 &&
    typeof value[0] === 'number' &&
    Number.isFinite(value[0]) &&
    typeof value[1] === 'number' &&
    Number.isFinite(value[1])
  );
}

/**
 * Merge `additions` into a series sorted by step. A step appears once; a later value
 * for the same step (a replayed or corrected event) replaces the earlier one.
 * Appending newer steps, the live case, costs O(k); anything else O((n + k) log(n + k)).
 */
export function mergePoints(series: readonly Point[], additions: readonly Point[]): Point[] {
  if (additions.length === 0) return series.slice();
  let appendOnly = true;
  let last = series.length ? series[series.length - 1]![0] : -Infinity;
  for (const [step] of additions) {
    if (step <= last) {
      appendOnly = false;
      break;
    }
    last = step;
  }
  if (appendOnly) return series.concat(additions);

  const byStep = new Map<number, number>();
  for (const [step, value] of series) byStep.set(step, value);
  for (const [step, value] of additions) byStep.set(step, value);
  return Array.from(byStep, ([step, value]): Point => [step, value]).sort((a, b) => a[0] - b[0]);
}

/** Clean a GET /metrics payload: drop malformed or non-finite points, sort by step. */
export function normalizeSeries(raw: unknown): Record<string, Point[]> {
  const out: Record<string, Point[]> = {};
  if (typeof raw !== 'object' || raw === null) return out;
  for (const [name, points] of Object.entries(raw as Record<string, unknown>)) {
    if (!Array.isArray(points)) continue;
    const clean = points.filter(isPoint).map((p): Point => [p[0], p[1]]);
    out[name] = mergePoints([], clean.sort((a, b) => a[0] - b[0]));
  }
  return out;
}

/**
 * Fold the metrics events of a batch into the series. Arrays of metrics the batch
 * does not touch keep their identity, and so does the map when nothing changed,
 * so React re-renders only the charts that moved.
 */
export function applyMetricEvents(series: SeriesMap, events: readonly JobEvent[]): SeriesMap {
  const additions = new Map<string, Point[]>();
  for (const event of events) {
    if (event.kind !== 'metrics') continue;
    const { step, metrics } = event.data;
    if (typeof step !== 'number' || !Number.isFinite(step) || !metrics) continue;
    for (const [name, value] of Object.entries(metrics)) {
      if (typeof value !== 'number' || !Number.isFinite(value)) continue;
      let list = additions.get(name);
      if (!list) additions.set(name, (list = []));
      list.push([step, value]);
    }
  }
  if (additions.size === 0) return series;
  const next: Record<string, readonly Point[]> = { ...series };
  for (const [name, points] of additions) {
    // Events of one batch arrive in seq order, which is step order in practice; sort
    // anyway so mergePoints' append fast path stays correct if a step is re-reported.
    const sorted = points.every((p, i) => i === 0 || points[i - 1]![0] < p[0])
      ? points
      : mergePoints([], points.slice().sort((a, b) => a[0] - b[0]));
    next[name] = mergePoints(series[name] ?? [], sorted);
  }
  return next;
}

/** Metrics a reader looks for first, in this order; any others follow alphabetically. */
const PREFERRED_ORDER = [
  'critic/score/mean',
  'critic/rewards/mean',
  'actor/ppo_kl',
  'actor/entropy',
  'response_length/mean',
  'perf/throughput',
  'timing_s/step',
  'perf/gpu_util',
];

export function orderMetricNames(names: Iterable<string>): string[] {
  const rank = (name: string): number => {
    const i = PREFERRED_ORDER.indexOf(name);
    return i < 0 ? PREFERRED_ORDER.length : i;
  };
  return Array.from(names).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** The data-testid of a metric's chart: "perf/throughput" -> "chart-perf_throughput". */
export function chartTestId(metricName: string): string {
  return `chart-${metricName.replaceAll('/', '_')}`;
}

/** Unit shown next to a metric's name, where the name implies one. */
export function metricUnit(metricName: string): string {
  // verl's perf/throughput is trained tokens per second per GPU.
  if (metricName === 'perf/throughput') return 'tokens/s per GPU';
  if (metricName === 'perf/total_num_tokens') return 'tokens';
  if (metricName.startsWith('timing_s/')) return 's';
  if (metricName === 'response_length/clip_ratio') return 'fraction';
  if (metricName.startsWith('response_length/')) return 'tokens';
  return '';
}

/**
 * Seed live series with a fetched history: the GET /metrics answer can land after
 * the first socket events, so merge both ways; on a shared step the live value wins.
 */
export function mergeSeriesMaps(history: SeriesMap, live: SeriesMap): SeriesMap {
  const out: Record<string, readonly Point[]> = { ...history };
  for (const [name, points] of Object.entries(live)) {
    out[name] = out[name] ? mergePoints(out[name], points) : points;
  }
  return out;
}
