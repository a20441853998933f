import { describe, expect, it } from 'vitest';
import type { InstalledReward } from '../../api/rewards';
import { rewardDetail, specReward, withReward } from './rewards';

const slow: InstalledReward = {
  name: 'json_match',
  description: 'JSON equal',
  suits: 'structured output',
  time_limit_s: 2,
  builtin: false,
  source: 'my_rewards:json_match (my-rewards 1.0)',
};

describe('the reward picker', () => {
  it('reads data.grader, numeric when the spec names none', () => {
    expect(specReward('{"data": {"grader": "math"}}')).toBe('math');
    expect(specReward('{"data": {"train_batch_size": 8}}')).toBe('numeric');
    expect(specReward('{}')).toBe('numeric');
    expect(specReward('{"data": ')).toBeNull();
  });

  it('sets data.grader, keeping the rest of the spec', () => {
    const text = withReward('{"model": "m", "data": {"train_batch_size": 8, "grader": "numeric"}}', 'json_match');
    expect(JSON.parse(text ?? '')).toEqual({ model: 'm', data: { train_batch_size: 8, grader: 'json_match' } });
    expect(JSON.parse(withReward('{}', 'math') ?? '')).toEqual({ data: { grader: 'math' } });
    expect(withReward('[1]', 'math')).toBeNull();
  });

  it('says each reward’s limit and origin', () => {
    expect(rewardDetail(slow)).toBe('2 s per reply, installed');
    expect(rewardDetail({ ...slow, time_limit_s: null, builtin: true })).toBe('in-process, built in');
  });
});
