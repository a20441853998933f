// Pure helpers for the jobs list: filters as a query string, ETA, GPU-hours, compare links.

import { isTerminal, type Job } from '../../api/types';

export interface JobFilters {
  /** Statuses to show; empty means all. */
  statuses: readonly string[];
  /** Case-insensitive substring of the job name; "" for any. */
  name: string;
  /** One exact tag; "" for any. */
  tag: string;
}

export const NO_FILTERS: JobFilters = { statuses: [], name: '', tag: '' };

/**
 * The query string of GET /api/v1/jobs for these filters: "?status=a,b&name=x&tag=y",
 * or "" when nothing is filtered. Blank text filters are left out; statuses keep the
 * order given, once each.
 */
export function buildJobsQuery(filters: JobFilters): string {
  const parts: string[] = [];
  const statuses = Array.from(new Set(filters.statuses.filter((s) => s.trim() !== '')));
  if (statuses.length) parts.push(`status=${statuses.map(encodeURIComponent).join(',')}`);
  const name = filters.name.trim();
  if (name) parts.push(`name=${encodeURIComponent(name)}`);
  const tag = filters.tag.trim();
  if (tag) parts.push(`tag=${encodeURIComponent(tag)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

/**
 * The filters in a query string of the form buildJobsQuery writes (the jobs list keeps its
 * filters in its own URL in that form, so a reload or the back button brings them back).
 * Unknown statuses are dropped; missing parts are "any".
 */
export function parseJobFilters(search: string, known: readonly string[]): JobFilters {
  const params = new URLSearchParams(search);
  const statuses: string[] = [];
  for (const part of (params.get('status') ?? '').split(',')) {
    const s = part.trim();
    if (known.includes(s) && !statuses.includes(s)) statuses.push(s);
  }
  return { statuses, name: (params.get('name') ?? '').trim(), tag: (params.get('tag') ?? '').trim() };
}

/** True when any filter narrows the list. */
export function isFiltered(filters: JobFilters): boolean {
  return buildJobsQuery(filters) !== '';
}

/**
 * Seconds until a job finishes, from its pace so far: elapsed / step * (total - step),
 * elapsed counted from `started_at`. Null when unknown: not started, no step done yet,
 * no total, or the job has already ended.
 */
export function estimateEtaSeconds(
  job: Pick<Job, 'status' | 'started_at' | 'progress'>,
  nowMs: number,
): number | null {
  if (isTerminal(job.status) || !job.started_at) return null;
  const { step, total_steps: total } = job.progress;
  if (!(step > 0) || !(total > 0)) return null;
  const started = Date.parse(job.started_at);
  if (Number.isNaN(started)) return null;
  const elapsed = (nowMs - started) / 1000;
  if (!(elapsed > 0)) return null;
  const remaining = Math.max(0, total - step);
  return (elapsed / step) * remaining;
}

/** "—" (unknown), "<1m", "12m", "3h 05m", "2d 4h". */
export function formatEta(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return '—';
  if (seconds < 60) return '<1m';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${String(minutes % 60).padStart(2, '0')}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

/** GPU-hours from billed GPU-seconds (0 when unknown or negative). */
export function gpuHours(gpuSeconds: number): number {
  return Number.isFinite(gpuSeconds) && gpuSeconds > 0 ? gpuSeconds / 3600 : 0;
}

export const COMPARE_PATH = '/compare';
/** Lines a comparison can tell apart (one colour each). */
export const MAX_COMPARE = 8;

/** `/compare?jobs=<id>,<id>` for the selected jobs. */
export function comparePath(jobIds: readonly string[]): string {
  return `${COMPARE_PATH}?jobs=${jobIds.map(encodeURIComponent).join(',')}`;
}

/** The job ids of a compare page's query string (deduplicated, at most MAX_COMPARE). */
export function parseCompareIds(search: string): string[] {
  const raw = new URLSearchParams(search).get('jobs') ?? '';
  const ids: string[] = [];
  for (const part of raw.split(',')) {
    const id = part.trim();
    if (id && !ids.includes(id)) ids.push(id);
  }
  return ids.slice(0, MAX_COMPARE);
}
