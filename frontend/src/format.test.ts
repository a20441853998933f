import { describe, expect, it } from 'vitest';
import { formatAge, formatValue, progressFraction } from './format';

describe('formatAge', () => {
  const now = Date.parse('2025-06-01T12:00:00Z');
  it.each([
    ['2025-06-01T11:59:58Z', 'just now'],
    ['2025-06-01T11:59:18Z', '42s ago'],
    ['2025-06-01T11:55:00Z', '5m ago'],
    ['2025-06-01T09:00:00Z', '3h ago'],
    ['2025-05-30T12:00:00Z', '2d ago'],
    ['2025-06-01T12:00:03Z', 'just now'], // a server clock slightly ahead
    ['garbage', ''],
  ])('%s -> %s', (iso, expected) => {
    expect(formatAge(iso, now)).toBe(expected);
  });
});

describe('formatValue', () => {
  it.each([
    [1234.5, '1,235'],
    [0.012345, '0.01235'],
    [0, '0'],
    [3e-7, '3.00e-7'],
    [12_345_678, '1.23e+7'],
  ])('%d -> %s', (value, expected) => {
    expect(formatValue(value)).toBe(expected);
  });
});

describe('progressFraction', () => {
  it.each([
    [0, 100, 0],
    [25, 100, 0.25],
    [120, 100, 1],
    [5, 0, 0], // total not known yet
  ])('%d/%d -> %d', (step, total, expected) => {
    expect(progressFraction(step, total)).toBe(expected);
  });
});
