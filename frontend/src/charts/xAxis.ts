import type { Point } from '../api/types';
import type { SeriesMap } from './series';

/** What the x axis counts: training steps, the job's elapsed time, or tokens trained on. */
export type XAxisMode = 'step' | 'wall' | 'tokens';

/**
 * The per-step metric each non-step axis is summed from. verl reports a step's duration and its
 * token count, not running totals, so the totals are integrated here. For a simulated job the
 * durations are the cost model's, so "wall time" is the simulated run's clock.
 */
export const X_AXIS_SOURCES: Readonly<Record<Exclude<XAxisMode, 'step'>, string>> = {
  wall: 'timing_s/step',
  tokens: 'perf/total_num_tokens',
};

export const X_AXIS_LABELS: Readonly<Record<XAxisMode, string>> = {
  step: 'Step',
  wall: 'Wall time',
  tokens: 'Tokens seen',
};

/** A running total by step, sorted by step: `[step, total at the end of that step]`. */
export type Clock = readonly Point[];

/** The axes the series can be drawn against: always steps; the others where their source has points. */
export function availableXAxes(series: SeriesMap): XAxisMode[] {
  const modes: XAxisMode[] = ['step'];
  for (const mode of ['wall', 'tokens'] as const) {
    if ((series[X_AXIS_SOURCES[mode]]?.length ?? 0) > 0) modes.push(mode);
  }
  return modes;
}

/** A job's running totals for each axis whose source it reports. */
export function jobClocks(series: SeriesMap): Partial<Record<Exclude<XAxisMode, 'step'>, Clock>> {
  const clocks: Partial<Record<Exclude<XAxisMode, 'step'>, Clock>> = {};
  for (const mode of ['wall', 'tokens'] as const) {
    const source = series[X_AXIS_SOURCES[mode]];
    if (source && source.length > 0) clocks[mode] = runningTotal(source);
  }
  return clocks;
}

/** The axes every one of several jobs can be drawn against (a shared axis must mean one thing). */
export function commonXAxes(perJob: readonly SeriesMap[]): XAxisMode[] {
  if (perJob.length === 0) return ['step'];
  return perJob.map(availableXAxes).reduce((common, modes) => common.filter((m) => modes.includes(m)));
}

/**
 * Integrate a per-step series over steps: each point's value counts once for every step since
 * the previous point (1 for the first). Exact when every step is present (a live run); a close
 * estimate over a downsampled history, whose points stand for the steps between them.
 */
export function runningTotal(points: readonly Point[]): Clock {
  const out: Point[] = new Array(points.length);
  let total = 0;
  let prevStep: number | null = null;
  for (let i = 0; i < points.length; i++) {
    const [step, value] = points[i]!;
    total += value * (prevStep === null ? 1 : Math.max(0, step - prevStep));
    prevStep = step;
    out[i] = [step, total];
  }
  return out;
}

/**
 * The clock's total at `step`: interpolated between its neighbouring points, extended along
 * its last (or first) slope past either end. NaN for an empty clock.
 */
export function clockAt(clock: Clock, step: number): number {
  const n = clock.length;
  if (n === 0) return Number.NaN;
  if (n === 1) return clock[0]![1];
  let hi = 1;
  if (step >= clock[n - 1]![0]) hi = n - 1;
  else if (step > clock[0]![0]) {
    let lo = 0;
    hi = n - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (clock[mid]![0] <= step) lo = mid;
      else hi = mid;
    }
  }
  const [s0, t0] = clock[hi - 1]!;
  const [s1, t1] = clock[hi]!;
  return s1 === s0 ? t1 : t0 + ((step - s0) / (s1 - s0)) * (t1 - t0);
}

/** Each point's x on the chosen axis (the step itself, or the clock's total at that step). */
export function xValues(points: readonly Point[], mode: XAxisMode, clock: Clock | undefined): number[] {
  if (mode === 'step' || !clock || clock.length === 0) return points.map((p) => p[0]);
  return points.map((p) => clockAt(clock, p[0]));
}

/**
 * Several series on one shared, sorted x array (uPlot's "aligned data"): every x that any
 * series has, each series' value there or null. Equal x values are merged.
 */
export function alignSeries(
  series: readonly { xs: readonly number[]; ys: readonly number[] }[],
): [number[], ...(number | null)[][]] {
  const all = new Set<number>();
  for (const s of series) for (const x of s.xs) all.add(x);
  const xs = Array.from(all).sort((a, b) => a - b);
  if (series.length === 1 && xs.length === series[0]!.xs.length) {
    // The common case (the job page): already sorted and unique, nothing to look up.
    return [xs, series[0]!.ys.slice()];
  }
  const index = new Map(xs.map((x, i) => [x, i]));
  const columns = series.map((s) => {
    const column: (number | null)[] = new Array(xs.length).fill(null);
    s.xs.forEach((x, i) => {
      column[index.get(x)!] = s.ys[i]!;
    });
    return column;
  });
  return [xs, ...columns];
}

/** An x value as the axis shows it: a step, a duration (1h 05m, 42s) or a token count (1.2M). */
export function formatX(value: number, mode: XAxisMode): string {
  if (!Number.isFinite(value)) return '';
  if (mode === 'wall') {
    const s = Math.round(value);
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
  }
  if (mode === 'tokens') {
    const abs = Math.abs(value);
    for (const [div, suffix] of [
      [1e12, 'T'],
      [1e9, 'B'],
      [1e6, 'M'],
      [1e3, 'k'],
    ] as const) {
      if (abs >= div) return `${Number((value / div).toPrecision(3))}${suffix}`;
    }
    return String(Math.round(value));
  }
  return String(Math.round(value));
}
