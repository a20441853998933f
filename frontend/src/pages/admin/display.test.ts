import { describe, expect, it } from 'vitest';
import {
  describeAuditData,
  flattenFacts,
  formatAmount,
  gpuCeiling,
  guaranteedOf,
  markerPercent,
  meterLevel,
  meterPercent,
  reasonCounts,
  splitReason,
} from './display';

describe('usage bars', () => {
  it.each([
    [0, 8, 0],
    [2, 8, 25],
    [1, 3, 33.3],
    [8, 8, 100],
    [12, 8, 100],
    [0, 0, 0],
    [1, 0, 100],
    [-1, 8, 0],
    [Number.NaN, 8, 0],
  ])('%s of %s fills %s%%', (value, max, percent) => {
    expect(meterPercent(value, max)).toBe(percent);
  });

  it.each([
    [0, 8, 'ok'],
    [6, 8, 'ok'],
    [7, 8, 'high'],
    [8, 8, 'full'],
    [9, 8, 'over'],
    [0, 0, 'full'],
    [1, 0, 'over'],
  ])('%s of %s is %s', (value, max, level) => {
    expect(meterLevel(value, max)).toBe(level);
  });

  it('marks the guarantee inside the ceiling only', () => {
    expect(markerPercent(4, 8)).toBe(50);
    expect(markerPercent(0, 8)).toBeNull();
    expect(markerPercent(8, 8)).toBeNull();
    expect(markerPercent(2, 0)).toBeNull();
  });

  it("adds the cluster's guarantee and the borrow limit", () => {
    const report = {
      device_type: 'h100',
      limits: { guaranteed_gpus: { h100: 4, a100: 16 }, borrow_limit_gpus: 2 },
    } as unknown as Parameters<typeof gpuCeiling>[0];
    expect(guaranteedOf(report)).toBe(4);
    expect(gpuCeiling(report)).toBe(6);
    expect(gpuCeiling({ ...report, device_type: 'b200' })).toBe(2);
  });

  it('formats amounts with at most one decimal', () => {
    expect(formatAmount(12.345)).toBe('12.3');
    expect(formatAmount(1000)).toBe('1,000');
    expect(formatAmount(0)).toBe('0');
  });
});

describe('queue reasons', () => {
  it('splits a reason into its code and detail', () => {
    expect(splitReason('quota: 0 jobs running, the limit is 0')).toEqual({
      code: 'quota',
      detail: '0 jobs running, the limit is 0',
    });
    expect(splitReason('fair_share: a tenant ...')).toEqual({ code: 'fair_share', detail: 'a tenant ...' });
    expect(splitReason('')).toEqual({ code: '', detail: '' });
    expect(splitReason('waiting: for 2 GPUs')).toEqual({ code: 'waiting', detail: 'for 2 GPUs' });
    expect(splitReason('Needs 2: GPUs')).toEqual({ code: '', detail: 'Needs 2: GPUs' });
  });

  it('counts the queue by reason, most first', () => {
    expect(
      reasonCounts([
        { admitted: false, reason: 'quota: a' },
        { admitted: false, reason: 'capacity: b' },
        { admitted: false, reason: 'quota: c' },
        { admitted: true, reason: '' },
        { admitted: false, reason: '' },
      ]),
    ).toEqual([
      ['quota', 2],
      ['admitted', 1],
      ['capacity', 1],
      ['pending', 1],
    ]);
  });
});

describe('audit data', () => {
  it('shows changes as from → to', () => {
    expect(
      describeAuditData({
        max_running_jobs: { from: 4, to: 0 },
        guaranteed_gpus: { from: {}, to: { h100: 2 } },
        role: 'member',
        scopes: ['jobs:read'],
      }),
    ).toEqual([
      'max_running_jobs: 4 → 0',
      'guaranteed_gpus: {} → {"h100":2}',
      'role: member',
      'scopes: ["jobs:read"]',
    ]);
  });

  it('copes with data that is not an object', () => {
    expect(describeAuditData({})).toEqual([]);
    expect(describeAuditData(null)).toEqual([]);
    expect(describeAuditData('x')).toEqual(['x']);
  });
});

describe('engine facts', () => {
  it('flattens nested facts to dotted keys', () => {
    expect(
      flattenFacts({
        cluster: { device_type: 'h100', num_devices: 8 },
        scheduler: 'jigsaw',
        pipelines: {},
        clock_s: 12.345,
        speed: null,
      }),
    ).toEqual([
      ['cluster.device_type', 'h100'],
      ['cluster.num_devices', '8'],
      ['scheduler', 'jigsaw'],
      ['pipelines', '—'],
      ['clock_s', '12.3'],
      ['speed', '—'],
    ]);
  });
});
