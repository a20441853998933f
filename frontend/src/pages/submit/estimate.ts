import type { JobEstimate } from '../../api/estimate';

export type { JobEstimate };

/** How long the form waits after the last keystroke before asking for a new estimate. */
export const ESTIMATE_DEBOUNCE_MS = 400;

/** `7.1 s`, `2 min 43 s`, `3 h 05 min`, `2 d 4 h`: engine seconds for people. */
export function formatDuration(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  const pad = (n: number) => String(n).padStart(2, '0');
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${pad(whole % 60)} s`;
  if (whole < 86400) return `${Math.floor(whole / 3600)} h ${pad(Math.floor((whole % 3600) / 60))} min`;
  return `${Math.floor(whole / 86400)} d ${Math.floor((whole % 86400) / 3600)} h`;
}

export function formatCost(estimate: JobEstimate): string {
  const { amount, currency } = estimate.cost;
  return `${amount.toFixed(2)} ${currency}`;
}

/** The queue line: none, about how long, or never (a limit that leaves no room). */
export function formatQueueWait(estimate: JobEstimate): string {
  const { wait_s, jobs_ahead, gpus_free } = estimate.queue;
  if (wait_s === null) return 'never, as it is (see below)';
  if (wait_s === 0) return `none (${gpus_free} GPUs free)`;
  return `about ${formatDuration(wait_s)} (${jobs_ahead} job${jobs_ahead === 1 ? '' : 's'} ahead)`;
}

/** How far the tenant's recent estimates landed: `+4% (3 jobs)`, or `none yet`. */
export function formatRecord(record: JobEstimate['record']): string {
  if (record === null) return 'none yet';
  const percent = Math.round(record.step_s_error * 100);
  return `${percent >= 0 ? '+' : ''}${percent}% (${record.jobs} job${record.jobs === 1 ? '' : 's'})`;
}

/** The spec to estimate, or null while the text is not a JSON object (nothing to ask). */
export function specToEstimate(specText: string): Record<string, unknown> | null {
  try {
    const spec: unknown = JSON.parse(specText);
    return typeof spec === 'object' && spec !== null && !Array.isArray(spec) ? (spec as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
