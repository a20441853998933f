// The quota form without React: its inputs, which of them changed, and where the API's
// field errors go. Input keys are the API's field paths (`max_running_jobs`,
// `guaranteed_gpus.h100`), so an error's `field` names its input directly.
import type { QuotaChanges, QuotaLimits } from '../../api/admin';
import type { FieldError } from '../../api/types';

export const GUARANTEED = 'guaranteed_gpus';

export type NumberKind = 'int' | 'float';

export interface ScalarField {
  key: Exclude<keyof QuotaLimits, 'guaranteed_gpus' | 'budget_action'>;
  label: string;
  kind: NumberKind;
  hint: string;
}

/** The numeric limits, in form order (the guarantees come first, then budget_action last). */
export const SCALAR_FIELDS: readonly ScalarField[] = [
  { key: 'borrow_limit_gpus', label: 'Borrow limit (GPUs)', kind: 'int', hint: 'beyond the guarantee, while idle' },
  { key: 'max_running_jobs', label: 'Max running jobs', kind: 'int', hint: '0 stops admitting' },
  { key: 'max_queued_jobs', label: 'Max queued jobs', kind: 'int', hint: 'submissions beyond are refused' },
  { key: 'max_gpus_per_job', label: 'Max GPUs per job', kind: 'int', hint: 'at least 1' },
  { key: 'monthly_gpu_hours', label: 'Monthly GPU-hours', kind: 'float', hint: 'budget' },
  { key: 'priority_limit', label: 'Priority limit', kind: 'float', hint: 'highest job priority' },
  { key: 'fair_share_weight', label: 'Fair-share weight', kind: 'float', hint: 'larger gets more' },
];

/** Form values as typed (strings), keyed by API field path. */
export type QuotaDraft = Record<string, string>;

export function guaranteedKey(deviceType: string): string {
  return `${GUARANTEED}.${deviceType}`;
}

/** The device types with a guarantee input: those the quota names, and the cluster's own. */
export function guaranteedTypes(limits: QuotaLimits, clusterDeviceType: string): string[] {
  const types = new Set(Object.keys(limits.guaranteed_gpus ?? {}));
  if (clusterDeviceType) types.add(clusterDeviceType);
  return [...types].sort((a, b) =>
    a === clusterDeviceType ? -1 : b === clusterDeviceType ? 1 : a.localeCompare(b),
  );
}

export function draftFromLimits(limits: QuotaLimits, clusterDeviceType: string): QuotaDraft {
  const draft: QuotaDraft = {};
  for (const type of guaranteedTypes(limits, clusterDeviceType)) {
    draft[guaranteedKey(type)] = String(limits.guaranteed_gpus?.[type] ?? 0);
  }
  for (const field of SCALAR_FIELDS) draft[field.key] = String(limits[field.key]);
  draft.budget_action = String(limits.budget_action);
  return draft;
}

function parseNumber(raw: string | undefined, kind: NumberKind): number | string {
  const text = (raw ?? '').trim();
  if (text === '') return 'enter a number';
  const value = Number(text);
  if (!Number.isFinite(value)) return 'enter a number';
  if (kind === 'int' && !Number.isInteger(value)) return 'enter a whole number';
  return value;
}

function sameGuarantees(a: Record<string, number>, b: Record<string, number>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if ((a[k] ?? 0) !== (b[k] ?? 0)) return false;
  return true;
}

export interface QuotaDiff {
  /** Only the fields whose value differs from `base`; empty when nothing changed. */
  changes: QuotaChanges;
  /** Inputs that are not numbers; nothing should be sent while there are any. */
  errors: FieldError[];
}

/**
 * What to PATCH: the fields of `draft` that differ from `base` (the limits the form was
 * opened with). Ranges are left to the server, whose messages are the authority; only
 * inputs that are not numbers at all are reported here. A changed guarantee sends the
 * whole map (the API replaces it), without zero entries the quota never had.
 */
export function quotaDiff(base: QuotaLimits, draft: QuotaDraft): QuotaDiff {
  const changes: QuotaChanges = {};
  const errors: FieldError[] = [];

  const baseGuaranteed = base.guaranteed_gpus ?? {};
  const guaranteed: Record<string, number> = {};
  for (const [key, raw] of Object.entries(draft)) {
    if (!key.startsWith(`${GUARANTEED}.`)) continue;
    const type = key.slice(GUARANTEED.length + 1);
    const value = parseNumber(raw, 'int');
    if (typeof value === 'string') errors.push({ field: key, message: value });
    else if (value !== 0 || type in baseGuaranteed) guaranteed[type] = value;
  }
  for (const [type, value] of Object.entries(baseGuaranteed)) {
    if (!(guaranteedKey(type) in draft)) guaranteed[type] = value; // no input: kept as is
  }
  if (!errors.length && !sameGuarantees(baseGuaranteed, guaranteed)) changes.guaranteed_gpus = guaranteed;

  for (const field of SCALAR_FIELDS) {
    const value = parseNumber(draft[field.key], field.kind);
    if (typeof value === 'string') errors.push({ field: field.key, message: value });
    else if (value !== base[field.key]) changes[field.key] = value;
  }

  const action = draft.budget_action;
  if (action !== undefined && action !== base.budget_action) changes.budget_action = action;

  return { changes, errors };
}

export interface PlacedErrors {
  /** Messages for each input key (and `guaranteed_gpus` for the guarantee group as a whole). */
  byField: Record<string, string[]>;
  /** Errors that name no input of the form; shown at the top of it. */
  general: FieldError[];
}

/** Put each API field error at the input it names; the rest are the form's. */
export function placeFieldErrors(details: readonly FieldError[], inputKeys: Iterable<string>): PlacedErrors {
  const keys = new Set(inputKeys);
  const byField: Record<string, string[]> = {};
  const general: FieldError[] = [];
  const add = (key: string, message: string) => {
    (byField[key] ??= []).push(message);
  };
  for (const d of details) {
    if (keys.has(d.field)) add(d.field, d.message);
    else if (d.field === GUARANTEED || d.field.startsWith(`${GUARANTEED}.`)) {
      const type = d.field.slice(GUARANTEED.length + 1);
      add(GUARANTEED, type ? `${type}: ${d.message}` : d.message);
    } else general.push(d);
  }
  return { byField, general };
}

/** "max_running_jobs 0 → 2" lines for a saved change, to confirm what was sent. */
export function describeChanges(base: QuotaLimits, changes: QuotaChanges): string[] {
  return Object.entries(changes).map(([key, to]) => {
    const from = base[key as keyof QuotaLimits];
    return `${key} ${formatLimit(from)} → ${formatLimit(to)}`;
  });
}

export function formatLimit(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    return entries.length ? entries.map(([k, v]) => `${k}: ${String(v)}`).join(', ') : 'none';
  }
  return String(value);
}
