import type { ClusterStep, VerlEstimate } from '../../api/types';
import type { UtilPoint } from './timeline';

/**
 * Effective MFU over time: for each of `buckets` equal slices of [since, now], the
 * training-equivalent FLOPs of the finished steps (each spread evenly over its own
 * [start, end]) over what the whole cluster could have done in the slice at peak.
 * A step counts once it has finished, so the newest slices fill in as steps end.
 */
export function effectiveMfu(
  steps: readonly Pick<ClusterStep, 'start_s' | 'end_s' | 'flops'>[],
  numDevices: number,
  peakFlops: number,
  since: number,
  now: number,
  buckets = 60,
): UtilPoint[] {
  if (numDevices <= 0 || !(peakFlops > 0) || now <= since || buckets <= 0) return [];
  const width = (now - since) / buckets;
  const done = new Array<number>(buckets).fill(0);
  for (const step of steps) {
    if (!(step.flops > 0)) continue;
    const length = step.end_s - step.start_s;
    if (length <= 0) {
      // An instantaneous step: all of it in the slice it ended in.
      if (step.end_s < since || step.end_s > now) continue;
      done[Math.min(buckets - 1, Math.floor((step.end_s - since) / width))]! += step.flops;
      continue;
    }
    const rate = step.flops / length;
    const start = Math.max(step.start_s, since);
    const end = Math.min(step.end_s, now);
    if (end <= start) continue;
    const first = Math.min(buckets - 1, Math.floor((start - since) / width));
    const last = Math.min(buckets - 1, Math.floor((end - since) / width));
    for (let b = first; b <= last; b++) {
      const lo = since + b * width;
      const overlap = Math.min(end, lo + width) - Math.max(start, lo);
      if (overlap > 0) done[b]! += overlap * rate;
    }
  }
  const capacity = width * numDevices * peakFlops;
  return done.map((f, b) => ({ t: since + (b + 0.5) * width, value: Math.min(1, f / capacity) }));
}

/** Mean of a series' values (0 for none). */
export function meanValue(points: readonly UtilPoint[]): number {
  return points.length ? points.reduce((sum, p) => sum + p.value, 0) / points.length : 0;
}

/** "1.31×": two decimals, or "—" when there is nothing to compare. */
export function formatSpeedup(speedup: number | null): string {
  return speedup === null || !Number.isFinite(speedup) ? '—' : `${speedup.toFixed(2)}×`;
}

/** The readout's help text: what the estimate is and how it is computed, with its figures. */
export function verlExplanation(estimate: VerlEstimate, formatS: (s: number) => string): string {
  const how =
    'Estimated, not measured: each step that finished in the window is re-costed with the same sampled ' +
    "sequences and the engine's cost model, laid out as verl runs it (synchronous, rollout and training " +
    "colocated): on a partition of the job's own GPUs, or alone on the whole cluster, whichever is faster. " +
    'verl is given every advantage (its partitions packed perfectly, every job present from the start), ' +
    'so the gain shown is a lower estimate.';
  if (estimate.speedup === null) return `${how} ${estimate.note ?? ''}`.trim();
  return (
    `${how} These ${estimate.steps} steps took ${formatS(estimate.actual_s)} of engine time here; ` +
    `verl would need about ${formatS(estimate.verl_s)} ` +
    `(dedicated partitions ${formatS(estimate.verl_dedicated_s)}, whole cluster ${formatS(estimate.verl_serial_s)}).`
  );
}
