import type { ClusterSpan, LostDevice } from '../../api/types';

/** The windows of engine time the page offers, in engine seconds. */
export const WINDOWS: readonly { seconds: number; label: string }[] = [
  { seconds: 300, label: '5 min' },
  { seconds: 900, label: '15 min' },
  { seconds: 3600, label: '1 h' },
];

export const OTHER_TENANT_LABEL = "another tenant's job";
export const OTHER_COLOR = '#9aa3af';

/** The legend key of a span's job: its id, or one key for all other tenants' work. */
export const OTHER_KEY = 'other';
export function jobKey(span: Pick<ClusterSpan, 'job'>): string {
  return span.job ?? OTHER_KEY;
}

/** FNV-1a over the string: a small stable hash for colours. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A stable colour per job id (the same on every poll and page load); grey for others. */
export function jobColor(job: string | null): string {
  if (job === null || job === OTHER_KEY) return OTHER_COLOR;
  const h = hash(job);
  const hue = h % 360;
  // Keep clear of grey: saturated, two lightness bands; yellows to cyans (bright hues) darker,
  // so white letters and patterns on them stay readable.
  const light = (hue >= 40 && hue <= 190 ? 30 : 40) + ((h >>> 9) % 2) * 8;
  return `hsl(${hue} 65% ${light}%)`;
}

export type KindGroup = 'rollout' | 'logprob' | 'train' | 'sync' | 'other';

export interface KindInfo {
  group: KindGroup;
  /** One letter drawn on spans wide enough to hold it. */
  letter: string;
  label: string;
}

const KINDS: Record<string, KindInfo> = {
  load: { group: 'sync', letter: 'L', label: 'load weights' },
  prefill: { group: 'rollout', letter: 'P', label: 'rollout prefill' },
  decode: { group: 'rollout', letter: 'D', label: 'rollout decode' },
  tool: { group: 'rollout', letter: 'T', label: 'tool call' },
  reward: { group: 'rollout', letter: 'R', label: 'reward' },
  old_logprob: { group: 'logprob', letter: 'O', label: 'old log-prob' },
  ref_logprob: { group: 'logprob', letter: 'F', label: 'reference log-prob' },
  train: { group: 'train', letter: 'U', label: 'train (update)' },
  weight_sync: { group: 'sync', letter: 'S', label: 'weight sync' },
};

export function kindInfo(kind: string): KindInfo {
  return KINDS[kind] ?? { group: 'other', letter: kind.charAt(0).toUpperCase() || '?', label: kind };
}

/** The kind groups, each drawn with its own fill pattern, in legend order. */
export const KIND_GROUPS: readonly { group: KindGroup; label: string; kinds: string }[] = [
  { group: 'rollout', label: 'Rollout', kinds: 'prefill, decode, tool, reward' },
  { group: 'logprob', label: 'Log-prob', kinds: 'old / reference log-prob' },
  { group: 'train', label: 'Training', kinds: 'train' },
  { group: 'sync', label: 'Sync / load', kinds: 'weight sync, load' },
  { group: 'other', label: 'Other', kinds: 'anything else' },
];

export function kindLegend(): { kind: string; info: KindInfo }[] {
  return Object.entries(KINDS).map(([kind, info]) => ({ kind, info }));
}

/**
 * Where the drawn time axis starts: the window's start, except that while the engine's clock
 * has run for less than the window (`since` < 0) nothing before the clock's start (0, or the
 * earliest span if earlier) is drawn, so a young cluster is not squeezed into the right edge.
 */
export function viewStart(since: number, spans: readonly Pick<ClusterSpan, 'start_s'>[]): number {
  if (since >= 0) return since;
  const earliest = spans.reduce((lo, s) => Math.min(lo, s.start_s), 0);
  return Math.max(since, earliest);
}

/** One span as drawn on one device row: vertical place [offset, offset + share) of the row. */
export interface PlacedSpan {
  key: string;
  span: ClusterSpan;
  device: number;
  start: number;
  end: number;
  offset: number;
  height: number;
}

function spanId(span: ClusterSpan): string {
  return `${span.job ?? OTHER_KEY}|${span.kind}|${span.bucket}|${span.step}|${span.worker}|${span.start_s}`;
}

/**
 * Lay the spans out on one row per device, clipped to [since, now]. Spans that overlap in
 * time on a device stack: each takes the lowest free band of height `share` (first fit), so
 * two co-located halves fill the row. Rows come back sorted by start time.
 */
export function layoutRows(
  spans: readonly ClusterSpan[],
  numDevices: number,
  since: number,
  now: number,
): PlacedSpan[][] {
  const rows: PlacedSpan[][] = Array.from({ length: Math.max(0, numDevices) }, () => []);
  const sorted = [...spans].sort((a, b) => a.start_s - b.start_s || b.share - a.share);
  for (const span of sorted) {
    const start = Math.max(span.start_s, since);
    const end = Math.min(span.running ? Math.max(span.end_s, now) : span.end_s, now);
    if (end < start) continue;
    const height = Math.min(1, Math.max(0.05, span.share));
    for (const device of new Set(span.devices)) {
      const row = rows[device];
      if (!row) continue;
      const busy = row.filter((p) => p.start < end && start < p.end).map((p) => [p.offset, p.offset + p.height]);
      busy.sort((a, b) => a[0]! - b[0]!);
      let offset = 0;
      for (const [lo, hi] of busy) {
        if (offset + height <= lo! + 1e-9) break;
        offset = Math.max(offset, hi!);
      }
      if (offset + height > 1 + 1e-9) offset = Math.max(0, 1 - height); // over-committed: overlap
      row.push({ key: `${spanId(span)}|${device}`, span, device, start, end, offset, height });
    }
  }
  return rows;
}

export interface UtilPoint {
  /** The bucket's midpoint, engine seconds. */
  t: number;
  /** Busy fraction of the cluster's device-time in the bucket, 0..1. */
  value: number;
}

/**
 * Utilisation over time: for each of `buckets` equal slices of [since, now], the sum of
 * share × overlap over every span and each of its devices, over slice length × devices.
 */
export function utilisation(
  spans: readonly ClusterSpan[],
  numDevices: number,
  since: number,
  now: number,
  buckets = 60,
): UtilPoint[] {
  if (numDevices <= 0 || now <= since || buckets <= 0) return [];
  const width = (now - since) / buckets;
  const busy = new Array<number>(buckets).fill(0);
  for (const span of spans) {
    const devices = new Set(span.devices).size;
    if (devices === 0 || span.share <= 0) continue;
    const start = Math.max(span.start_s, since);
    const end = Math.min(span.running ? now : span.end_s, now);
    if (end <= start) continue;
    const first = Math.min(buckets - 1, Math.floor((start - since) / width));
    const last = Math.min(buckets - 1, Math.floor((end - since) / width));
    for (let b = first; b <= last; b++) {
      const lo = since + b * width;
      const overlap = Math.min(end, lo + width) - Math.max(start, lo);
      if (overlap > 0) busy[b]! += overlap * span.share * devices;
    }
  }
  return busy.map((v, b) => ({ t: since + (b + 0.5) * width, value: Math.min(1, v / (width * numDevices)) }));
}

export interface JobShare {
  key: string;
  job: string | null;
  name: string;
  /** Devices' worth of the running spans (share × devices), and that over the cluster. */
  devices: number;
  fraction: number;
}

/** Who holds the cluster right now: device-shares of the running spans, by job, largest first. */
export function currentShares(spans: readonly ClusterSpan[], numDevices: number): JobShare[] {
  const byJob = new Map<string, JobShare>();
  for (const span of spans) {
    if (!span.running) continue;
    const key = jobKey(span);
    const entry = byJob.get(key) ?? { key, job: span.job, name: span.job_name, devices: 0, fraction: 0 };
    entry.devices += span.share * new Set(span.devices).size;
    byJob.set(key, entry);
  }
  const out = [...byJob.values()].filter((e) => e.devices > 0);
  for (const e of out) e.fraction = numDevices > 0 ? Math.min(1, e.devices / numDevices) : 0;
  return out.sort((a, b) => b.devices - a.devices || a.key.localeCompare(b.key));
}

/** Busy fraction of the cluster right now (all running spans' device-shares). */
export function currentUtilisation(spans: readonly ClusterSpan[], numDevices: number): number {
  const total = currentShares(spans, numDevices).reduce((sum, e) => sum + e.devices, 0);
  return numDevices > 0 ? Math.min(1, total / numDevices) : 0;
}

export interface LegendJob {
  key: string;
  job: string | null;
  name: string;
  color: string;
  running: boolean;
}

/** The jobs in the window: the caller's own by name (sorted), other tenants' work last. */
export function legendJobs(spans: readonly ClusterSpan[]): LegendJob[] {
  const byKey = new Map<string, LegendJob>();
  for (const span of spans) {
    const key = jobKey(span);
    const prev = byKey.get(key);
    if (prev) prev.running ||= span.running;
    else
      byKey.set(key, {
        key,
        job: span.job,
        name: span.job === null ? OTHER_TENANT_LABEL : span.job_name,
        color: jobColor(span.job),
        running: span.running,
      });
  }
  return [...byKey.values()].sort(
    (a, b) => Number(a.job === null) - Number(b.job === null) || a.name.localeCompare(b.name) || a.key.localeCompare(b.key),
  );
}

/** One line per lost node, its devices listed: what an operator reads first on the page. */
export function lostNodeLines(lost: readonly LostDevice[], now: number): string[] {
  const byNode = new Map<number, LostDevice[]>();
  for (const d of lost) byNode.set(d.node, [...(byNode.get(d.node) ?? []), d]);
  return [...byNode.entries()]
    .sort(([a], [b]) => a - b)
    .map(([node, devices]) => {
      const ids = devices.map((d) => d.device).sort((a, b) => a - b);
      const since = Math.min(...devices.map((d) => d.since_s));
      const what = ids.length === 1 ? `device ${ids[0]}` : `devices ${ids.join(', ')}`;
      return `Node ${node} lost ${formatSeconds(now - since)} ago (${what}): ${devices[0]!.reason}`;
    });
}

/** Engine seconds as "45 s", "3 min 20 s", "1 h 5 min". */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, seconds);
  if (s < 10) return Number.isInteger(s) ? `${s} s` : `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) {
    const m = Math.floor(s / 60);
    const rest = Math.round(s - m * 60);
    return rest ? `${m} min ${rest} s` : `${m} min`;
  }
  const h = Math.floor(s / 3600);
  const m = Math.round((s - h * 3600) / 60);
  return m ? `${h} h ${m} min` : `${h} h`;
}

export function formatPercent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction > 0 && fraction < 0.1 ? 1 : 0)}%`;
}

/** Ticks for the time axis: offsets before now (engine seconds), nicely spaced. */
export function timeTicks(window: number, count = 5): number[] {
  const steps = [1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600];
  const step = steps.find((s) => window / s <= count) ?? Math.ceil(window / count);
  const out: number[] = [];
  for (let ago = 0; ago <= window + 1e-9; ago += step) out.push(ago);
  return out;
}

/** Keyboard moves over the placed spans: left/right along a row, up/down to the nearest in time. */
export function moveFocus(rows: readonly PlacedSpan[][], current: string | null, key: string): string | null {
  const flat = rows.flat();
  if (flat.length === 0) return null;
  const at = current ? flat.find((p) => p.key === current) : undefined;
  if (!at) return flat[0]!.key;
  const row = rows[at.device]!;
  const i = row.findIndex((p) => p.key === at.key);
  if (key === 'ArrowRight') return (row[i + 1] ?? at).key;
  if (key === 'ArrowLeft') return (row[i - 1] ?? at).key;
  if (key === 'Home') return (row[0] ?? at).key;
  if (key === 'End') return (row[row.length - 1] ?? at).key;
  if (key === 'ArrowUp' || key === 'ArrowDown') {
    const dir = key === 'ArrowUp' ? -1 : 1;
    for (let d = at.device + dir; d >= 0 && d < rows.length; d += dir) {
      const other = rows[d]!;
      if (other.length === 0) continue;
      const mid = (at.start + at.end) / 2;
      let best = other[0]!;
      for (const p of other) {
        const dist = (q: PlacedSpan) => Math.abs((q.start + q.end) / 2 - mid);
        if (dist(p) < dist(best)) best = p;
      }
      return best.key;
    }
    return at.key;
  }
  return at.key;
}
