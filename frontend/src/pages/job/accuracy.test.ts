import { describe, expect, it } from 'vitest';
import { formatError } from './EstimateAccuracy';

describe('formatError', () => {
  it('signs the error and says when there is none', () => {
    expect(formatError(0.123)).toBe('+12%');
    expect(formatError(-0.08)).toBe('-8%');
    expect(formatError(0)).toBe('+0%');
    expect(formatError(null)).toBe('n/a');
  });
});
