import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/errors';
import {
  LATEST,
  actionErrorTitle,
  canCancel,
  canDelete,
  canPause,
  canResume,
  checkpointChoices,
  cloneBody,
  errorLines,
  fieldHasError,
  parseOverrides,
} from './actions';

describe('which actions apply', () => {
  it('pauses queued, starting, running and recovering jobs only', () => {
    for (const s of ['queued', 'starting', 'running', 'recovering']) expect(canPause(s)).toBe(true);
    for (const s of ['pausing', 'paused', 'cancelling', 'succeeded', 'failed', 'cancelled']) {
      expect(canPause(s)).toBe(false);
    }
  });
  it('resumes paused jobs only', () => {
    expect(canResume('paused')).toBe(true);
    expect(canResume('pausing')).toBe(false);
    expect(canResume('running')).toBe(false);
  });
  it('cancels anything not ended and not already cancelling', () => {
    expect(canCancel('paused')).toBe(true);
    expect(canCancel('queued')).toBe(true);
    expect(canCancel('cancelling')).toBe(false);
    expect(canCancel('succeeded')).toBe(false);
  });
  it('deletes ended jobs only', () => {
    for (const s of ['succeeded', 'failed', 'cancelled']) expect(canDelete(s)).toBe(true);
    for (const s of ['queued', 'running', 'paused', 'cancelling', 'pausing']) expect(canDelete(s)).toBe(false);
  });
});

describe('inline errors', () => {
  it('reads a 409 as "does not apply now"', () => {
    const e = new ApiError(409, 'invalid_state', 'only a paused job can be resumed; this one is running');
    expect(actionErrorTitle('resume', e)).toBe(
      'Cannot resume this job now: only a paused job can be resumed; this one is running',
    );
    expect(actionErrorTitle('pause', new ApiError(500, 'server_error', 'boom'))).toBe('Pause failed: boom');
  });
  it('lists details as field: message', () => {
    const e = new ApiError(400, 'invalid_spec', 'bad', [
      { field: 'overrides.rollout.n', message: 'must be >= 1, got 0' },
      { field: '', message: 'something else' },
    ]);
    expect(errorLines(e)).toEqual(['overrides.rollout.n: must be >= 1, got 0', 'something else']);
    expect(fieldHasError(e.details, 'overrides')).toBe(true);
    expect(fieldHasError(e.details, 'checkpoint_step')).toBe(false);
    expect(fieldHasError([{ field: 'overridesX' }], 'overrides')).toBe(false);
  });
});

describe('parseOverrides', () => {
  it('treats an empty box as no overrides', () => {
    expect(parseOverrides('  \n')).toEqual({ ok: true, value: {} });
  });
  it('accepts a JSON object', () => {
    expect(parseOverrides('{"trainer": {"total_steps": 20}}')).toEqual({
      ok: true,
      value: { trainer: { total_steps: 20 } },
    });
  });
  it('refuses invalid JSON and non-objects', () => {
    const bad = parseOverrides('{trainer: 1}');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toMatch(/^is not valid JSON/);
    for (const text of ['[1]', '3', 'null', '"x"']) {
      const r = parseOverrides(text);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/must be a JSON object/);
    }
  });
});

describe('checkpointChoices', () => {
  it('offers latest, scratch, then each checkpoint newest first, the final one marked', () => {
    const at = '2025-01-01T00:00:00Z';
    const choices = checkpointChoices(
      [
        { step: 5, created_at: at, download_url: null },
        { step: 12, created_at: at, download_url: null },
        { step: 5, created_at: at, download_url: null },
        { step: 8, created_at: at, download_url: null },
      ],
      12,
    );
    expect(choices.map((c) => c.value)).toEqual([LATEST, '0', '12', '8', '5']);
    expect(choices[2]!.label).toBe('Step 12 (final)');
    expect(choices[3]!.label).toBe('Step 8');
  });
  it('has the two defaults without checkpoints', () => {
    expect(checkpointChoices([], 0).map((c) => c.value)).toEqual([LATEST, '0']);
  });
});

describe('cloneBody', () => {
  it('leaves checkpoint_step out for the latest', () => {
    expect(cloneBody({ name: ' x ', checkpoint: LATEST, overrides: {} })).toEqual({ name: 'x', overrides: {} });
  });
  it('sends the chosen step, 0 included', () => {
    expect(cloneBody({ name: '', checkpoint: '0', overrides: {} })).toEqual({
      name: '',
      overrides: {},
      checkpoint_step: 0,
    });
    expect(cloneBody({ name: '', checkpoint: '8', overrides: { a: 1 } })).toEqual({
      name: '',
      overrides: { a: 1 },
      checkpoint_step: 8,
    });
  });
});
