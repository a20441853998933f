import { describe, expect, it } from 'vitest';
import type { Sample } from '../../api/types';
import { formatReward, groupSamplesByStep, responseLengths, rewardTone } from './samples';

const sample = (step: number, reward: number, prompt = `p${step}`): Sample => ({
  step,
  prompt,
  completion: 'c',
  answer: 'a',
  reward,
  turns: 1,
});

describe('groupSamplesByStep', () => {
  it('puts the newest step first and keeps the order within a step', () => {
    const groups = groupSamplesByStep([
      sample(2, 1, 'x'),
      sample(5, 0),
      sample(2, 0, 'y'),
      sample(5, 1),
      sample(3, 0.5),
    ]);
    expect(groups.map((g) => g.step)).toEqual([5, 3, 2]);
    expect(groups[2]!.samples.map((s) => s.prompt)).toEqual(['x', 'y']);
    expect(groups[0]!.meanReward).toBe(0.5);
    expect(groups[1]!.meanReward).toBe(0.5);
  });

  it('leaves non-finite rewards out of the mean', () => {
    const [g] = groupSamplesByStep([sample(1, Number.NaN), sample(1, 1)]);
    expect(g!.meanReward).toBe(1);
    expect(groupSamplesByStep([sample(1, Number.NaN)])[0]!.meanReward).toBeNull();
    expect(groupSamplesByStep([])).toEqual([]);
  });
});

describe('formatReward / rewardTone', () => {
  it('formats at most four decimals', () => {
    expect(formatReward(1)).toBe('1');
    expect(formatReward(0.5)).toBe('0.5');
    expect(formatReward(1 / 3)).toBe('0.3333');
    expect(formatReward(-0.25)).toBe('-0.25');
    expect(formatReward(null)).toBe('—');
  });
  it('colours by sign', () => {
    expect(rewardTone(1)).toBe('good');
    expect(rewardTone(0)).toBe('zero');
    expect(rewardTone(-1)).toBe('bad');
  });
});

describe('responseLengths', () => {
  it('counts tokens when every sample has them, characters otherwise', () => {
    const withTokens = [
      { ...sample(1, 1), response_tokens: 12 },
      { ...sample(1, 0), response_tokens: 30 },
    ];
    expect(responseLengths(withTokens)).toEqual({ unit: 'tokens', values: [12, 30] });
    const older = [withTokens[0]!, { ...sample(1, 0), completion: 'four', response_tokens: null }];
    expect(responseLengths(older)).toEqual({ unit: 'characters', values: [1, 4] });
  });
});
