import { describe, expect, it } from 'vitest';
import type { ClusterSpan } from '../../api/types';
import {
  currentShares,
  currentUtilisation,
  formatSeconds,
  jobColor,
  kindInfo,
  layoutRows,
  legendJobs,
  lostNodeLines,
  moveFocus,
  OTHER_COLOR,
  OTHER_TENANT_LABEL,
  timeTicks,
  utilisation,
  viewStart,
} from './timeline';

function span(over: Partial<ClusterSpan>): ClusterSpan {
  return {
    job: 'job-a',
    job_name: 'alpha',
    kind: 'decode',
    bucket: 'dense',
    step: 1,
    worker: 0,
    devices: [0],
    start_s: 0,
    end_s: 10,
    share: 1,
    running: false,
    ...over,
  };
}

describe('jobColor', () => {
  it('is stable per job and grey for other tenants', () => {
    expect(jobColor('job-a')).toBe(jobColor('job-a'));
    expect(jobColor('job-a')).not.toBe(jobColor('job-b'));
    expect(jobColor('job-a')).toMatch(/^hsl\(\d+ 65% \d+%\)$/);
    expect(jobColor(null)).toBe(OTHER_COLOR);
  });
});

describe('kindInfo', () => {
  it('groups kinds and falls back for unknown ones', () => {
    expect(kindInfo('decode').group).toBe('rollout');
    expect(kindInfo('ref_logprob').group).toBe('logprob');
    expect(kindInfo('train').group).toBe('train');
    expect(kindInfo('weight_sync').group).toBe('sync');
    expect(kindInfo('mystery')).toEqual({ group: 'other', letter: 'M', label: 'mystery' });
  });
});

describe('layoutRows', () => {
  it('puts a span on each of its devices, clipped to the window', () => {
    const rows = layoutRows([span({ devices: [0, 2], start_s: -5, end_s: 5 })], 3, 0, 20);
    expect(rows.map((r) => r.length)).toEqual([1, 0, 1]);
    expect(rows[0]![0]).toMatchObject({ start: 0, end: 5, offset: 0, height: 1, device: 0 });
    expect(rows[0]![0]!.key).not.toBe(rows[2]![0]!.key);
  });

  it('stacks co-located spans by share and reuses freed bands', () => {
    const rows = layoutRows(
      [
        span({ job: 'a', share: 0.5, start_s: 0, end_s: 10 }),
        span({ job: 'b', share: 0.5, start_s: 2, end_s: 8 }),
        span({ job: 'c', share: 0.5, start_s: 10, end_s: 12 }),
      ],
      1,
      0,
      20,
    );
    const offsets = Object.fromEntries(rows[0]!.map((p) => [p.span.job, p.offset]));
    expect(offsets).toEqual({ a: 0, b: 0.5, c: 0 });
  });

  it('overlaps rather than overflowing an over-committed device', () => {
    const rows = layoutRows([span({ share: 0.8 }), span({ job: 'b', share: 0.8, start_s: 1 })], 1, 0, 20);
    expect(rows[0]![1]!.offset).toBeCloseTo(0.2);
  });

  it('runs a running span to now and drops spans on unknown devices', () => {
    const rows = layoutRows([span({ running: true, end_s: 12 }), span({ devices: [9] })], 2, 0, 15);
    expect(rows[0]![0]!.end).toBe(15);
    expect(rows.flat()).toHaveLength(1);
  });
});

describe('utilisation', () => {
  it('sums share × overlap × devices per bucket over device-time', () => {
    const points = utilisation(
      [span({ devices: [0, 1], start_s: 0, end_s: 5, share: 1 }), span({ devices: [2], start_s: 5, end_s: 10, share: 0.5 })],
      4,
      0,
      10,
      2,
    );
    expect(points).toEqual([
      { t: 2.5, value: 0.5 },
      { t: 7.5, value: 0.125 },
    ]);
  });

  it('ignores host-only spans, caps at 1 and handles an empty cluster', () => {
    expect(utilisation([span({ devices: [] })], 1, 0, 10, 1)[0]!.value).toBe(0);
    expect(utilisation([span({}), span({ job: 'b' })], 1, 0, 10, 1)[0]!.value).toBe(1);
    expect(utilisation([], 0, 0, 10)).toEqual([]);
  });
});

describe('current shares', () => {
  const spans = [
    span({ running: true, devices: [0, 1], share: 1 }),
    span({ running: true, job: null, job_name: OTHER_TENANT_LABEL, devices: [2], share: 0.5 }),
    span({ running: true, job: null, job_name: OTHER_TENANT_LABEL, devices: [3], share: 0.5 }),
    span({ running: false, job: 'job-b', job_name: 'beta', devices: [4] }),
  ];

  it('adds device-shares of running spans by job', () => {
    const shares = currentShares(spans, 8);
    expect(shares.map((s) => [s.key, s.devices, s.fraction])).toEqual([
      ['job-a', 2, 0.25],
      ['other', 1, 0.125],
    ]);
    expect(currentUtilisation(spans, 8)).toBeCloseTo(0.375);
  });

  it('lists own jobs by name, other tenants last', () => {
    const jobs = legendJobs([...spans, span({ job: 'job-c', job_name: 'aardvark' })]);
    expect(jobs.map((j) => [j.name, j.running])).toEqual([
      ['aardvark', false],
      ['alpha', true],
      ['beta', false],
      [OTHER_TENANT_LABEL, true],
    ]);
  });
});

describe('formatting and axis', () => {
  it('formats engine seconds', () => {
    expect(formatSeconds(2.25)).toBe('2.3 s');
    expect(formatSeconds(45)).toBe('45 s');
    expect(formatSeconds(200)).toBe('3 min 20 s');
    expect(formatSeconds(900)).toBe('15 min');
    expect(formatSeconds(3900)).toBe('1 h 5 min');
  });

  it('spaces ticks nicely', () => {
    expect(timeTicks(300)).toEqual([0, 60, 120, 180, 240, 300]);
    expect(timeTicks(3600)).toEqual([0, 900, 1800, 2700, 3600]);
    expect(timeTicks(33)).toEqual([0, 10, 20, 30]);
  });
});

describe('moveFocus', () => {
  const rows = layoutRows(
    [span({ start_s: 0, end_s: 2 }), span({ start_s: 3, end_s: 5 }), span({ devices: [2], start_s: 3, end_s: 4 })],
    3,
    0,
    10,
  );
  const [a, b] = rows[0]!;
  const c = rows[2]![0]!;

  it('moves along a row and to the nearest span of the next busy row', () => {
    expect(moveFocus(rows, null, 'ArrowRight')).toBe(a!.key);
    expect(moveFocus(rows, a!.key, 'ArrowRight')).toBe(b!.key);
    expect(moveFocus(rows, b!.key, 'ArrowRight')).toBe(b!.key);
    expect(moveFocus(rows, b!.key, 'Home')).toBe(a!.key);
    expect(moveFocus(rows, b!.key, 'ArrowDown')).toBe(c.key);
    expect(moveFocus(rows, c.key, 'ArrowUp')).toBe(b!.key);
    expect(moveFocus([], null, 'ArrowUp')).toBeNull();
  });
});

describe('viewStart', () => {
  it('starts at the clock start while the window reaches before it', () => {
    expect(viewStart(100, [span({ start_s: 50 })])).toBe(100);
    expect(viewStart(-270, [span({ start_s: 2 })])).toBe(0);
    expect(viewStart(-270, [span({ start_s: -5 })])).toBe(-5);
    expect(viewStart(-270, [])).toBe(0);
  });
});

describe('lostNodeLines', () => {
  const reason = 'engine node 1 lost: Ray node 5d74 left the cluster';
  it('says nothing when every node is there', () => {
    expect(lostNodeLines([], 100)).toEqual([]);
  });
  it('gives one line per lost node, its devices in order, since the first was lost', () => {
    const lost = [
      { device: 3, node: 1, reason, since_s: 40 },
      { device: 2, node: 1, reason, since_s: 38 },
      { device: 4, node: 2, reason: 'engine node 2 lost', since_s: 95 },
    ];
    expect(lostNodeLines(lost, 100)).toEqual([
      `Node 1 lost 1 min 2 s ago (devices 2, 3): ${reason}`,
      'Node 2 lost 5 s ago (device 4): engine node 2 lost',
    ]);
  });
});
