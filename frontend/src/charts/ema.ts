/** Most smoothing the slider offers: a weight of 1 would freeze the line at its first value. */
export const MAX_SMOOTHING = 0.99;

/**
 * Exponential moving average as TensorBoard and W&B draw it: each value pulls the average by
 * `1 - weight`, and the early values are debiased (divided by `1 - weight^n`), so the smoothed
 * line starts on the data instead of rising from zero. `weight` 0 returns the values unchanged.
 * A null (a step this series has no value for) stays null and leaves the average as it was.
 */
export function emaSmooth(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight >= 0 && weight <= MAX_SMOOTHING)) {
    throw new RangeError(`smoothing weight must be in [0, ${MAX_SMOOTHING}], got ${weight}`);
  }
  if (weight === 0) return values.slice();
  const out: (number | null)[] = new Array(values.length);
  let average = 0;
  let seen = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    seen++;
    average = average * weight + (1 - weight) * v;
    out[i] = average / (1 - weight ** seen);
  }
  return out;
}
