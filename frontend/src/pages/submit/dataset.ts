import type { FieldError, GraderName } from '../../api/types';

export const GRADERS: readonly { name: GraderName; title: string }[] = [
  { name: 'numeric', title: 'numeric (the first number after ####)' },
  { name: 'exact_match', title: 'exact_match (the words after ####)' },
  { name: 'math', title: 'math (the \\boxed{} or LaTeX answer, checked with math-verify)' },
];

export const DATASET_REF_PREFIX = 'dataset:';

const NAME_OK = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** A file to upload as it is (Parquet is binary), rather than as text. */
export function isParquet(fileName: string): boolean {
  return /\.parquet$/i.test(fileName);
}

/**
 * A dataset name from an uploaded file's name: `gsm8k small.jsonl` -> `gsm8k-small`.
 * The server checks the result again (1-100 of `[A-Za-z0-9._-]`, no `..`).
 */
export function datasetNameFromFile(fileName: string): string {
  const base = fileName.split(/[\\/]/).pop() ?? '';
  const stem = base.replace(/\.(jsonl|parquet)$/i, '');
  const cleaned = stem
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 100);
  return NAME_OK.test(cleaned) ? cleaned : 'dataset';
}

/** One bad row of a refused upload, from the API's `rows[<line>]` details; others keep line null. */
export interface RowProblem {
  line: number | null;
  message: string;
}

export function rowProblems(details: readonly FieldError[]): RowProblem[] {
  return details.map((d) => {
    const match = /^rows\[(\d+)\]$/.exec(d.field);
    return { line: match ? Number(match[1]) : null, message: d.message };
  });
}

export type SpecEdit = { ok: true; text: string } | { ok: false; error: string };

/** The spec JSON with `data.train_files` set to the dataset's ref and `data.grader` to `grader`. */
export function withDataset(specText: string, name: string, grader: GraderName): SpecEdit {
  let spec: unknown;
  try {
    spec = JSON.parse(specText);
  } catch (e) {
    return { ok: false, error: `the spec is not valid JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    return { ok: false, error: 'the spec must be a JSON object ({...})' };
  }
  const record = spec as Record<string, unknown>;
  const data = record.data;
  const base = typeof data === 'object' && data !== null && !Array.isArray(data) ? data : {};
  const next = { ...record, data: { ...base, train_files: `${DATASET_REF_PREFIX}${name}`, grader } };
  return { ok: true, text: JSON.stringify(next, null, 2) };
}

/** The dataset the spec names in `data.train_files` (`dataset:<name>`), or null. */
export function datasetInSpec(specText: string): string | null {
  try {
    const spec: unknown = JSON.parse(specText);
    if (typeof spec !== 'object' || spec === null) return null;
    const data = (spec as Record<string, unknown>).data;
    if (typeof data !== 'object' || data === null) return null;
    const files = (data as Record<string, unknown>).train_files;
    return typeof files === 'string' && files.startsWith(DATASET_REF_PREFIX)
      ? files.slice(DATASET_REF_PREFIX.length)
      : null;
  } catch {
    return null;
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Which dataset to pick once `deleted` is gone from `before`: its neighbour in the list, or none. */
export function selectionAfterDelete(before: readonly string[], deleted: string): string {
  const i = before.indexOf(deleted);
  const rest = before.filter((n) => n !== deleted);
  if (rest.length === 0) return '';
  return rest[Math.min(Math.max(i, 0), rest.length - 1)]!;
}

/** "sha256 1a2b3c4d…": enough of the checksum to tell two uploads apart. */
export function shortSha(sha256: string): string {
  return sha256.length > 12 ? `${sha256.slice(0, 12)}…` : sha256;
}
