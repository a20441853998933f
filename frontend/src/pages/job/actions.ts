// Pure helpers for the job page's actions: which apply in which state, the clone form's
// parsing, and how an API error reads inline.

import type { ApiError } from '../../api/errors';
import type { Checkpoint, CloneJobInput } from '../../api/types';
import { isTerminal } from '../../api/types';

export type JobAction = 'pause' | 'resume' | 'cancel' | 'clone' | 'delete';

/** States the server pauses from (a queued job not yet admitted pauses at once). */
const PAUSABLE: ReadonlySet<string> = new Set(['queued', 'starting', 'running', 'recovering']);

export function canPause(status: string): boolean {
  return PAUSABLE.has(status);
}

export function canResume(status: string): boolean {
  return status === 'paused';
}

export function canCancel(status: string): boolean {
  return !isTerminal(status) && status !== 'cancelling';
}

/** Only an ended job can be deleted (the server answers 409 otherwise: cancel it first). */
export function canDelete(status: string): boolean {
  return isTerminal(status);
}

const VERBS: Record<JobAction, string> = {
  pause: 'pause',
  resume: 'resume',
  cancel: 'cancel',
  clone: 'clone',
  delete: 'delete',
};

/** The first line of an inline error: "Cannot pause now: ..." for a 409, else "Pause failed: ...". */
export function actionErrorTitle(action: JobAction, error: ApiError): string {
  const verb = VERBS[action];
  if (error.status === 409 || error.code === 'invalid_state') return `Cannot ${verb} this job now: ${error.message}`;
  return `${verb[0]!.toUpperCase()}${verb.slice(1)} failed: ${error.message}`;
}

/** The error's details as "field: message" lines (just the message where no field is named). */
export function errorLines(error: ApiError): string[] {
  return error.details.map((d) => (d.field ? `${d.field}: ${d.message}` : d.message));
}

export type ParsedOverrides =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; message: string };

/** The clone form's overrides box: empty means none; otherwise a JSON object. */
export function parseOverrides(text: string): ParsedOverrides {
  if (!text.trim()) return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    return { ok: false, message: `is not valid JSON (${detail})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, message: 'must be a JSON object, e.g. {"trainer": {"total_steps": 200}}' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/** The checkpoint select's value for "the latest checkpoint" (the server's default). */
export const LATEST = 'latest';

export interface CheckpointChoice {
  value: string;
  label: string;
}

/**
 * The clone form's checkpoint options: the latest (server default), from scratch, then
 * each checkpoint, newest first. The last step is marked: cloning from it trains nothing
 * unless the overrides raise trainer.total_steps.
 */
export function checkpointChoices(checkpoints: readonly Checkpoint[], totalSteps: number): CheckpointChoice[] {
  const steps = [...new Set(checkpoints.map((c) => c.step))].filter((s) => s > 0).sort((a, b) => b - a);
  return [
    { value: LATEST, label: 'Latest checkpoint that leaves steps to train (default)' },
    { value: '0', label: 'From scratch (step 0)' },
    ...steps.map((step) => ({
      value: String(step),
      label: totalSteps > 0 && step >= totalSteps ? `Step ${step} (final)` : `Step ${step}`,
    })),
  ];
}

/** The POST /clone body from the form's fields (overrides already parsed). */
export function cloneBody(form: {
  name: string;
  checkpoint: string;
  overrides: Record<string, unknown>;
}): CloneJobInput {
  const body: CloneJobInput = { name: form.name.trim(), overrides: form.overrides };
  if (form.checkpoint !== LATEST && form.checkpoint !== '') {
    const step = Number(form.checkpoint);
    if (Number.isInteger(step) && step >= 0) body.checkpoint_step = step;
  }
  return body;
}

/** Whether a server error names this form field ("overrides" matches "overrides.rollout.n"). */
export function fieldHasError(details: readonly { field: string }[], field: string): boolean {
  return details.some((d) => d.field === field || d.field.startsWith(`${field}.`));
}
