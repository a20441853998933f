import { describe, expect, it } from 'vitest';
import type { Sample } from '../../api/types';
import { chooseStepAt, pairByPrompt, resolveStep, stepsWithSamples } from './sampleSteps';

const sample = (step: number, prompt: string, completion = `c${step}`): Sample => ({
  step,
  prompt,
  completion,
  answer: 'a',
  reward: 0,
  turns: 1,
});

describe('stepsWithSamples', () => {
  it('lists each step once, oldest first', () => {
    expect(stepsWithSamples([sample(7, 'p'), sample(3, 'p'), sample(7, 'q')])).toEqual([3, 7]);
  });
});

describe('resolveStep', () => {
  it('follows the newest step when none is chosen', () => {
    expect(resolveStep([2, 4, 6], null)).toBe(6);
    expect(resolveStep([], null)).toBeNull();
  });

  it('keeps a chosen step, or takes the nearest once it is no longer stored', () => {
    expect(resolveStep([2, 4, 6], 4)).toBe(4);
    expect(resolveStep([10, 12, 20], 3)).toBe(10);
    expect(resolveStep([10, 12, 20], 17)).toBe(20);
  });
});

describe('chooseStepAt', () => {
  it('chooses the step under the slider, and following the newest at its end', () => {
    expect(chooseStepAt([2, 4, 6], 0)).toBe(2);
    expect(chooseStepAt([2, 4, 6], 1)).toBe(4);
    expect(chooseStepAt([2, 4, 6], 2)).toBeNull();
  });
});

describe('pairByPrompt', () => {
  it('pairs the prompts sampled at both steps and leaves the others out', () => {
    const left = [sample(1, 'a', 'a1'), sample(1, 'b'), sample(1, 'a', 'a2')];
    const right = [sample(5, 'c'), sample(5, 'a', 'a5')];
    const pairs = pairByPrompt(left, right);
    expect(pairs).toHaveLength(1);
    expect(pairs[0]?.prompt).toBe('a');
    expect(pairs[0]?.left.map((s) => s.completion)).toEqual(['a1', 'a2']);
    expect(pairs[0]?.right.map((s) => s.completion)).toEqual(['a5']);
  });
});
