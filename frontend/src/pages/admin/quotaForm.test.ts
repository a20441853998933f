import { describe, expect, it } from 'vitest';
import type { QuotaLimits } from '../../api/admin';
import {
  describeChanges,
  draftFromLimits,
  guaranteedTypes,
  placeFieldErrors,
  quotaDiff,
  SCALAR_FIELDS,
} from './quotaForm';

const limits: QuotaLimits = {
  guaranteed_gpus: { h100: 4 },
  borrow_limit_gpus: 4,
  max_running_jobs: 4,
  max_queued_jobs: 5,
  max_gpus_per_job: 8,
  monthly_gpu_hours: 1000,
  budget_action: 'block',
  priority_limit: 1,
  fair_share_weight: 1,
};

describe('draftFromLimits', () => {
  it('has an input per limit, keyed by the API field path', () => {
    expect(draftFromLimits(limits, 'h100')).toEqual({
      'guaranteed_gpus.h100': '4',
      borrow_limit_gpus: '4',
      max_running_jobs: '4',
      max_queued_jobs: '5',
      max_gpus_per_job: '8',
      monthly_gpu_hours: '1000',
      priority_limit: '1',
      fair_share_weight: '1',
      budget_action: 'block',
    });
  });

  it("adds the cluster's device type, first, when the quota has no guarantee for it", () => {
    const other = { ...limits, guaranteed_gpus: { a100: 2 } };
    expect(guaranteedTypes(other, 'h100')).toEqual(['h100', 'a100']);
    expect(draftFromLimits(other, 'h100')['guaranteed_gpus.h100']).toBe('0');
    expect(guaranteedTypes({ ...limits, guaranteed_gpus: {} }, 'h100')).toEqual(['h100']);
  });
});

describe('quotaDiff', () => {
  const draft = () => draftFromLimits(limits, 'h100');

  it('is empty when nothing changed', () => {
    expect(quotaDiff(limits, draft())).toEqual({ changes: {}, errors: [] });
  });

  it('sends only the changed fields, as numbers', () => {
    const d = { ...draft(), max_running_jobs: '0', monthly_gpu_hours: ' 250.5 ', budget_action: 'pause' };
    expect(quotaDiff(limits, d)).toEqual({
      changes: { max_running_jobs: 0, monthly_gpu_hours: 250.5, budget_action: 'pause' },
      errors: [],
    });
  });

  it('treats a different spelling of the same number as unchanged', () => {
    expect(quotaDiff(limits, { ...draft(), monthly_gpu_hours: '1000.0', priority_limit: '1e0' }).changes).toEqual({});
  });

  it('leaves ranges to the server: a negative number is sent', () => {
    expect(quotaDiff(limits, { ...draft(), max_running_jobs: '-1' }).changes).toEqual({ max_running_jobs: -1 });
  });

  it('reports inputs that are not (whole) numbers at their field', () => {
    const d = { ...draft(), max_running_jobs: '', fair_share_weight: 'abc', max_queued_jobs: '2.5' };
    expect(quotaDiff(limits, d).errors).toEqual([
      { field: 'max_running_jobs', message: 'enter a number' },
      { field: 'max_queued_jobs', message: 'enter a whole number' },
      { field: 'fair_share_weight', message: 'enter a number' },
    ]);
    expect(quotaDiff(limits, { ...draft(), monthly_gpu_hours: '2.5' }).errors).toEqual([]);
  });

  it('sends the whole guarantee map when one type changes', () => {
    const base = { ...limits, guaranteed_gpus: { h100: 4, a100: 2 } };
    const d = { ...draftFromLimits(base, 'h100'), 'guaranteed_gpus.h100': '6' };
    expect(quotaDiff(base, d).changes).toEqual({ guaranteed_gpus: { h100: 6, a100: 2 } });
  });

  it('does not invent a zero guarantee for the added device type input', () => {
    const base = { ...limits, guaranteed_gpus: {} };
    expect(quotaDiff(base, draftFromLimits(base, 'h100')).changes).toEqual({});
    const d = { ...draftFromLimits(base, 'h100'), 'guaranteed_gpus.h100': '3' };
    expect(quotaDiff(base, d).changes).toEqual({ guaranteed_gpus: { h100: 3 } });
  });

  it('keeps a guarantee it has no input for', () => {
    const base = { ...limits, guaranteed_gpus: { h100: 4, tpu: 1 } };
    const d = { ...draft(), 'guaranteed_gpus.h100': '5' };
    expect(quotaDiff(base, d).changes).toEqual({ guaranteed_gpus: { h100: 5, tpu: 1 } });
  });

  it('reports a bad guarantee and does not send the map', () => {
    const result = quotaDiff(limits, { ...draft(), 'guaranteed_gpus.h100': 'x', max_running_jobs: '2' });
    expect(result.errors).toEqual([{ field: 'guaranteed_gpus.h100', message: 'enter a number' }]);
    expect(result.changes).toEqual({ max_running_jobs: 2 });
  });

  it('covers every numeric limit', () => {
    expect(SCALAR_FIELDS.map((f) => f.key).sort()).toEqual(
      Object.keys(limits)
        .filter((k) => k !== 'guaranteed_gpus' && k !== 'budget_action')
        .sort(),
    );
  });
});

describe('placeFieldErrors', () => {
  const keys = Object.keys(draftFromLimits(limits, 'h100'));

  it('puts each error at the input it names', () => {
    const placed = placeFieldErrors(
      [
        { field: 'max_running_jobs', message: 'Ensure this value is greater than or equal to 0.' },
        { field: 'guaranteed_gpus.h100', message: "must be <= the cluster's 8 h100 GPUs, got 99" },
      ],
      keys,
    );
    expect(placed).toEqual({
      byField: {
        max_running_jobs: ['Ensure this value is greater than or equal to 0.'],
        'guaranteed_gpus.h100': ["must be <= the cluster's 8 h100 GPUs, got 99"],
      },
      general: [],
    });
  });

  it('collects several messages for one field', () => {
    const placed = placeFieldErrors(
      [
        { field: 'max_gpus_per_job', message: 'a' },
        { field: 'max_gpus_per_job', message: 'b' },
      ],
      keys,
    );
    expect(placed.byField.max_gpus_per_job).toEqual(['a', 'b']);
  });

  it('puts guarantee errors without an input on the guarantee group', () => {
    const placed = placeFieldErrors(
      [
        { field: 'guaranteed_gpus', message: 'Expected a dictionary of items.' },
        { field: 'guaranteed_gpus.tpu', message: 'A valid integer is required.' },
      ],
      keys,
    );
    expect(placed.byField.guaranteed_gpus).toEqual([
      'Expected a dictionary of items.',
      'tpu: A valid integer is required.',
    ]);
    expect(placed.general).toEqual([]);
  });

  it('leaves errors that name no input to the form', () => {
    const unknown = [
      { field: 'gpus', message: 'not a quota field' },
      { field: '<body>', message: 'bad' },
      { field: '', message: 'also bad' },
    ];
    expect(placeFieldErrors(unknown, keys)).toEqual({ byField: {}, general: unknown });
  });
});

describe('describeChanges', () => {
  it('says what changed from what', () => {
    expect(describeChanges(limits, { max_running_jobs: 2, guaranteed_gpus: { h100: 6 } })).toEqual([
      'max_running_jobs 4 → 2',
      'guaranteed_gpus h100: 4 → h100: 6',
    ]);
    expect(describeChanges({ ...limits, guaranteed_gpus: {} }, { guaranteed_gpus: { h100: 1 } })).toEqual([
      'guaranteed_gpus none → h100: 1',
    ]);
  });
});
