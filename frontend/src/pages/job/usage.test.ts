import { describe, expect, it } from 'vitest';
import { formatDevices, formatGpuHours, parseStatusReason } from './usage';

describe('formatGpuHours', () => {
  it('shows GPU-hours with precision that fits the size', () => {
    expect(formatGpuHours(0)).toBe('0 GPU-h');
    expect(formatGpuHours(-5)).toBe('0 GPU-h');
    expect(formatGpuHours(Number.NaN)).toBe('0 GPU-h');
    expect(formatGpuHours(20)).toBe('<0.01 GPU-h');
    expect(formatGpuHours(36)).toBe('0.01 GPU-h');
    expect(formatGpuHours(1512)).toBe('0.42 GPU-h');
    expect(formatGpuHours(3600 * 4)).toBe('4.00 GPU-h');
    expect(formatGpuHours(3600 * 12.46)).toBe('12.5 GPU-h');
    expect(formatGpuHours(3600 * 1234.4)).toBe('1,234 GPU-h');
  });
});

describe('formatDevices', () => {
  it('names the device type when there is one', () => {
    expect(formatDevices(4, 'h100')).toBe('4 × H100');
    expect(formatDevices(1, '')).toBe('1 GPU');
    expect(formatDevices(2, '')).toBe('2 GPUs');
  });
});

describe('parseStatusReason', () => {
  it('splits a known code from its detail', () => {
    expect(parseStatusReason('capacity: needs 4 GPUs, 2 free of 8')).toEqual({
      kind: 'capacity',
      detail: 'needs 4 GPUs, 2 free of 8',
      help: expect.stringContaining('free GPUs'),
    });
    expect(parseStatusReason('fair_share: a tenant with a smaller share is waiting').kind).toBe('fair_share');
    expect(parseStatusReason("budget: this month's GPU-hours are spent").detail).toBe(
      "this month's GPU-hours are spent",
    );
    expect(parseStatusReason('reclaimed: its tenant was borrowing').kind).toBe('reclaimed');
  });

  it('keeps other reasons whole', () => {
    expect(parseStatusReason('pause requested')).toEqual({ kind: null, detail: 'pause requested', help: '' });
    expect(parseStatusReason('engine: lost the worker')).toEqual({
      kind: null,
      detail: 'engine: lost the worker',
      help: '',
    });
    expect(parseStatusReason('')).toEqual({ kind: null, detail: '', help: '' });
  });
});
