import { describe, expect, it } from 'vitest';
import { ApiError, networkError } from '../api/errors';
import { createQueryClient, MAX_RETRIES, retryDelayMs, shouldRetry } from './client';

/** A query function that fails with `errors` in turn, then answers `value`. */
function failingThen<T>(errors: unknown[], value: T) {
  let calls = 0;
  const fn = async () => {
    calls += 1;
    if (calls <= errors.length) throw errors[calls - 1];
    return value;
  };
  return { fn, calls: () => calls };
}

const noDelay = () => 0;

describe('retries', () => {
  it.each([400, 403, 404, 409])('shows a %i at once: asking again gives the same answer', async (status) => {
    const client = createQueryClient({ retryDelay: noDelay });
    const read = failingThen([new ApiError(status, 'x', 'no')], 'never');
    await expect(client.fetchQuery({ queryKey: ['k'], queryFn: read.fn })).rejects.toMatchObject({ status });
    expect(read.calls()).toBe(1);
  });

  it('tries again after a network error or a 5xx, and shows the answer that then comes', async () => {
    const client = createQueryClient({ retryDelay: noDelay });
    const down = networkError(new TypeError('Failed to fetch'));
    const read = failingThen([down, new ApiError(502, 'x', 'bad gateway')], 7);
    await expect(client.fetchQuery({ queryKey: ['k'], queryFn: read.fn })).resolves.toBe(7);
    expect(read.calls()).toBe(3);
  });

  it('gives up after a few tries, with the last error', async () => {
    const client = createQueryClient({ retryDelay: noDelay });
    const down = networkError(new TypeError('Failed to fetch'));
    const read = failingThen(Array(10).fill(down), 'never');
    await expect(client.fetchQuery({ queryKey: ['k'], queryFn: read.fn })).rejects.toBe(down);
    expect(read.calls()).toBe(1 + MAX_RETRIES);
    expect(shouldRetry(MAX_RETRIES, down)).toBe(false);
  });

  it('waits longer before each retry, up to a cap', () => {
    expect([0, 1, 2, 3, 4, 10].map(retryDelayMs)).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  });

  it('makes one request for reads of the same key at the same time', async () => {
    const client = createQueryClient();
    const read = failingThen([], ['job']);
    const both = await Promise.all([
      client.fetchQuery({ queryKey: ['t', 'a', 'job', '1'], queryFn: read.fn }),
      client.fetchQuery({ queryKey: ['t', 'a', 'job', '1'], queryFn: read.fn }),
    ]);
    expect(both).toEqual([['job'], ['job']]);
    expect(read.calls()).toBe(1);
  });
});
