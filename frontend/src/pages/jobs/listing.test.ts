import { describe, expect, it } from 'vitest';
import {
  buildJobsQuery,
  comparePath,
  estimateEtaSeconds,
  formatEta,
  gpuHours,
  isFiltered,
  NO_FILTERS,
  parseCompareIds,
  parseJobFilters,
} from './listing';

describe('buildJobsQuery', () => {
  it('is empty without filters', () => {
    expect(buildJobsQuery(NO_FILTERS)).toBe('');
    expect(buildJobsQuery({ statuses: [], name: '  ', tag: '' })).toBe('');
    expect(isFiltered(NO_FILTERS)).toBe(false);
  });

  it('joins several statuses with commas, once each', () => {
    expect(buildJobsQuery({ statuses: ['running', 'queued', 'running'], name: '', tag: '' })).toBe(
      '?status=running,queued',
    );
  });

  it('adds trimmed, encoded name and tag', () => {
    expect(buildJobsQuery({ statuses: ['failed'], name: ' grpo & co ', tag: 'team/a' })).toBe(
      '?status=failed&name=grpo%20%26%20co&tag=team%2Fa',
    );
    expect(isFiltered({ statuses: [], name: '', tag: 'x' })).toBe(true);
  });
});

describe('parseJobFilters', () => {
  const known = ['queued', 'running', 'failed'];

  it('reads back what buildJobsQuery wrote', () => {
    const filters = { statuses: ['failed', 'running'], name: 'grpo & co', tag: 'team/a' };
    expect(parseJobFilters(buildJobsQuery(filters), known)).toEqual(filters);
    expect(parseJobFilters('', known)).toEqual(NO_FILTERS);
  });

  it('drops unknown and repeated statuses and trims text', () => {
    expect(parseJobFilters('?status=running,bogus,,running&name=%20x%20&other=1', known)).toEqual({
      statuses: ['running'],
      name: 'x',
      tag: '',
    });
  });
});

describe('estimateEtaSeconds', () => {
  const started = '2024-01-01T00:00:00Z';
  const t0 = Date.parse(started);

  it('extrapolates the pace so far', () => {
    const job = { status: 'running' as const, started_at: started, progress: { step: 10, total_steps: 40 } };
    // 100 s for 10 steps: 10 s a step, 30 steps left.
    expect(estimateEtaSeconds(job, t0 + 100_000)).toBeCloseTo(300);
  });

  it('is 0 once every step is done but the job has not ended', () => {
    const job = { status: 'running' as const, started_at: started, progress: { step: 40, total_steps: 40 } };
    expect(estimateEtaSeconds(job, t0 + 100_000)).toBe(0);
  });

  it.each([
    ['not started', { status: 'queued' as const, started_at: null, progress: { step: 0, total_steps: 40 } }],
    ['no step yet', { status: 'running' as const, started_at: started, progress: { step: 0, total_steps: 40 } }],
    ['no total', { status: 'running' as const, started_at: started, progress: { step: 3, total_steps: 0 } }],
    ['ended', { status: 'succeeded' as const, started_at: started, progress: { step: 40, total_steps: 40 } }],
    ['bad date', { status: 'running' as const, started_at: 'nope', progress: { step: 3, total_steps: 40 } }],
  ])('is unknown when %s', (_label, job) => {
    expect(estimateEtaSeconds(job, t0 + 100_000)).toBeNull();
  });
});

describe('formatEta', () => {
  it.each([
    [null, '—'],
    [Number.NaN, '—'],
    [0, '<1m'],
    [59, '<1m'],
    [300, '5m'],
    [3600 + 5 * 60, '1h 05m'],
    [50 * 3600, '2d 2h'],
  ])('%s -> %s', (s, text) => {
    expect(formatEta(s)).toBe(text);
  });
});

describe('gpuHours', () => {
  it('converts GPU-seconds', () => {
    expect(gpuHours(7200)).toBe(2);
    expect(gpuHours(900)).toBe(0.25);
    expect(gpuHours(-5)).toBe(0);
    expect(gpuHours(Number.NaN)).toBe(0);
  });
});

describe('compare links', () => {
  it('round-trips the selected ids', () => {
    const path = comparePath(['a', 'b c']);
    expect(path).toBe('/compare?jobs=a,b%20c');
    expect(parseCompareIds(path.slice(path.indexOf('?')))).toEqual(['a', 'b c']);
  });

  it('drops blanks and duplicates and caps the count', () => {
    expect(parseCompareIds('?jobs=a,,a,b')).toEqual(['a', 'b']);
    expect(parseCompareIds('')).toEqual([]);
    expect(parseCompareIds(`?jobs=${'1,2,3,4,5,6,7,8,9,10'}`)).toHaveLength(8);
  });
});
