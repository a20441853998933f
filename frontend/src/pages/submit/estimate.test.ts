import { describe, expect, it } from 'vitest';
import { formatDuration, formatQueueWait, formatRecord, specToEstimate, type JobEstimate } from './estimate';

describe('formatDuration', () => {
  it('picks the unit a person reads', () => {
    expect(formatDuration(7.06)).toBe('7.1 s');
    expect(formatDuration(163.4)).toBe('2 min 43 s');
    expect(formatDuration(5073.5)).toBe('1 h 24 min');
    expect(formatDuration(2 * 86400 + 4 * 3600 + 100)).toBe('2 d 4 h');
  });
});

describe('formatQueueWait', () => {
  const queue = (wait_s: number | null, jobs_ahead = 0): JobEstimate =>
    ({ queue: { wait_s, jobs_ahead, gpus_free: 6, method: '' } }) as JobEstimate;

  it('says none, about how long, or never', () => {
    expect(formatQueueWait(queue(0))).toBe('none (6 GPUs free)');
    expect(formatQueueWait(queue(90, 1))).toBe('about 1 min 30 s (1 job ahead)');
    expect(formatQueueWait(queue(null))).toMatch(/^never/);
  });
});

describe('specToEstimate', () => {
  it('asks only for a JSON object', () => {
    expect(specToEstimate('{"model": "qwen3-0.6b"}')).toEqual({ model: 'qwen3-0.6b' });
    expect(specToEstimate('{"model": ')).toBeNull();
    expect(specToEstimate('[1]')).toBeNull();
    expect(specToEstimate('null')).toBeNull();
  });
});

describe('formatRecord', () => {
  it('gives the median error of past jobs, signed', () => {
    expect(formatRecord(null)).toBe('none yet');
    expect(formatRecord({ jobs: 3, step_s_error: 0.041, gpu_hours_error: null })).toBe('+4% (3 jobs)');
    expect(formatRecord({ jobs: 1, step_s_error: -0.3, gpu_hours_error: -0.1 })).toBe('-30% (1 job)');
  });
});
