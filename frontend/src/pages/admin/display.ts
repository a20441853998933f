// Pure helpers for the admin page: usage bars, queue reasons, audit entries, engine facts.
import type { QuotaReport } from '../../api/admin';

export type MeterLevel = 'ok' | 'high' | 'full' | 'over';

/** Width of a usage bar, 0..100 (one decimal). A limit of 0 is full as soon as anything is used. */
export function meterPercent(value: number, max: number): number {
  if (!(value > 0)) return 0;
  if (!(max > 0)) return 100;
  return Math.min(100, Math.round((value / max) * 1000) / 10);
}

/** How close to its limit a usage is: under 80 % ok, then high, at the limit full, past it over. */
export function meterLevel(value: number, max: number): MeterLevel {
  if (value > max) return 'over';
  if (value >= max) return 'full'; // includes a limit of 0: nothing more fits
  if (value / max >= 0.8) return 'high';
  return 'ok';
}

/** The guarantee's place on a held/ceiling bar (percent), or null when there is none. */
export function markerPercent(at: number, max: number): number | null {
  if (!(at > 0) || !(max > 0) || at >= max) return null;
  return Math.round((at / max) * 1000) / 10;
}

/** GPUs a tenant may hold on this cluster's device type: guarantee plus borrow limit. */
export function gpuCeiling(report: Pick<QuotaReport, 'device_type' | 'limits'>): number {
  return guaranteedOf(report) + report.limits.borrow_limit_gpus;
}

export function guaranteedOf(report: Pick<QuotaReport, 'device_type' | 'limits'>): number {
  return report.limits.guaranteed_gpus?.[report.device_type] ?? 0;
}

/** "12.3" for GPU-hours and other fractional amounts; whole numbers stay whole. */
export function formatAmount(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return value.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

/** A queue reason `"quota: 0 jobs running, the limit is 0"` as its code and detail. */
export function splitReason(reason: string): { code: string; detail: string } {
  const i = reason.indexOf(':');
  if (i <= 0) return { code: '', detail: reason.trim() };
  const code = reason.slice(0, i).trim();
  if (!/^[a-z_]+$/.test(code)) return { code: '', detail: reason.trim() };
  return { code, detail: reason.slice(i + 1).trim() };
}

/** How many queued jobs wait for each reason (admitted ones under "admitted"), most first. */
export function reasonCounts(entries: readonly { admitted: boolean; reason: string }[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const e of entries) {
    const key = e.admitted ? 'admitted' : splitReason(e.reason).code || 'pending';
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}

function show(value: unknown): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

function isChange(value: unknown): value is { from: unknown; to: unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    'from' in value &&
    'to' in value &&
    Object.keys(value).length === 2
  );
}

/** An audit entry's data, one line a key: `max_running_jobs: 4 → 0` for changes. */
export function describeAuditData(data: unknown): string[] {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return data == null ? [] : [show(data)];
  return Object.entries(data as Record<string, unknown>).map(([key, value]) =>
    isChange(value) ? `${key}: ${show(value.from)} → ${show(value.to)}` : `${key}: ${show(value)}`,
  );
}

/** Nested engine facts as `[dotted.key, text]` rows, in the order given. */
export function flattenFacts(value: unknown, prefix = ''): [string, string][] {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const rows: [string, string][] = [];
    const entries = Object.entries(value as Record<string, unknown>);
    if (!entries.length && prefix) return [[prefix, '—']];
    for (const [k, v] of entries) rows.push(...flattenFacts(v, prefix ? `${prefix}.${k}` : k));
    return rows;
  }
  return [[prefix || 'value', typeof value === 'number' ? formatAmount(value) : show(value)]];
}
