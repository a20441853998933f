import { describe, expect, it } from 'vitest';
import { groupMetrics, matchesFilter, metricGroup } from './groups';

const NAMES = [
  'perf/throughput',
  'zeta/custom',
  'timing_s/step',
  'critic/score/mean',
  'val-core/gsm8k/acc',
  'actor/entropy',
  'response_length/mean',
  'lr',
  'actor/ppo_kl',
  'critic/rewards/mean',
  'alpha/x',
];

describe('metricGroup', () => {
  it('is the prefix before the first slash, or "other"', () => {
    expect(metricGroup('critic/score/mean')).toBe('critic');
    expect(metricGroup('val-core/gsm8k/acc')).toBe('val-core');
    expect(metricGroup('lr')).toBe('other');
    expect(metricGroup('/odd')).toBe('other');
  });
});

describe('matchesFilter', () => {
  it.each([
    ['critic/score/mean', '', true],
    ['critic/score/mean', 'SCORE', true],
    ['critic/score/mean', 'score mean', true],
    ['critic/score/mean', '  critic   ', true],
    ['critic/score/mean', 'score max', false],
    ['timing_s/step', 'critic', false],
  ])('%s with filter %j -> %s', (name, filter, expected) => {
    expect(matchesFilter(name, filter)).toBe(expected);
  });
});

describe('groupMetrics', () => {
  it("orders verl's groups first, then others alphabetically, then 'other'", () => {
    const groups = groupMetrics(NAMES);
    expect(groups.map((g) => g.name)).toEqual([
      'critic',
      'actor',
      'response_length',
      'timing_s',
      'perf',
      'val-core',
      'alpha',
      'zeta',
      'other',
    ]);
    // Inside a group: the preferred metrics first.
    expect(groups[0]!.metrics).toEqual(['critic/score/mean', 'critic/rewards/mean']);
    expect(groups[1]!.metrics).toEqual(['actor/ppo_kl', 'actor/entropy']);
  });

  it('keeps only matching metrics and drops emptied groups, counting the unfiltered total', () => {
    const groups = groupMetrics(NAMES, 'mean');
    expect(groups.map((g) => [g.name, g.metrics, g.total])).toEqual([
      ['critic', ['critic/score/mean', 'critic/rewards/mean'], 2],
      ['response_length', ['response_length/mean'], 1],
    ]);
    expect(groupMetrics(NAMES, 'no such metric')).toEqual([]);
  });
});
