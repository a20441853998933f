/** "just now", "42s ago", "5m ago", "3h ago", "2d ago" for an ISO time before `nowMs`. */
export function formatAge(iso: string, nowMs: number): string {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return '';
  const s = Math.floor((nowMs - then) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ago`;
  return `${Math.floor(h / 24)}d ago`;
}

/** Wall time of day (HH:MM:SS, local) of an ISO time, for event rows. */
export function formatClock(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleTimeString(undefined, { hour12: false });
}

export function formatDateTime(iso: string | null): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** A metric value with about four significant digits, e.g. 1234.5 -> "1,235", 0.012345 -> "0.01235". */
export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e7 || abs < 1e-4)) return value.toExponential(2);
  return value.toLocaleString('en-US', { maximumSignificantDigits: 4 });
}

/** Share of work done, 0..1; 0 when the total is unknown (0). */
export function progressFraction(step: number, totalSteps: number): number {
  if (!(totalSteps > 0) || !(step > 0)) return 0;
  return Math.min(1, step / totalSteps);
}
