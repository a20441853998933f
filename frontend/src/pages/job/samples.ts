// Sampled completions (real-mode jobs), grouped by training step for the samples panel.

import type { Sample } from '../../api/types';

export interface SampleGroup {
  step: number;
  samples: Sample[];
  /** Mean reward of the step's samples (NaN-free: non-finite rewards are left out). */
  meanReward: number | null;
}

/** Group by step, newest step first; within a step the server's order is kept. */
export function groupSamplesByStep(samples: readonly Sample[]): SampleGroup[] {
  const byStep = new Map<number, Sample[]>();
  for (const s of samples) {
    const list = byStep.get(s.step);
    if (list) list.push(s);
    else byStep.set(s.step, [s]);
  }
  return [...byStep.entries()]
    .sort((a, b) => b[0] - a[0])
    .map(([step, list]) => {
      const rewards = list.map((s) => s.reward).filter((r) => Number.isFinite(r));
      const meanReward = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
      return { step, samples: list, meanReward };
    });
}

/** A reward for display: "1", "0.5", "-0.25", "0.3333" (at most four decimals). */
export function formatReward(reward: number | null): string {
  if (reward === null || !Number.isFinite(reward)) return '—';
  return String(Number(reward.toFixed(4)));
}

/** good (> 0), bad (< 0) or zero: the reward badge's colour. */
export function rewardTone(reward: number): 'good' | 'bad' | 'zero' {
  if (reward > 0) return 'good';
  if (reward < 0) return 'bad';
  return 'zero';
}

export interface ResponseLengths {
  unit: 'tokens' | 'characters';
  values: number[];
}

/**
 * The samples' response lengths in tokens, as the job's response_length/ metrics count them;
 * in characters of the completion when some sample predates the token count being recorded.
 */
export function responseLengths(samples: readonly Sample[]): ResponseLengths {
  const tokens = samples.map((s) => s.response_tokens);
  if (tokens.every((t): t is number => typeof t === 'number')) return { unit: 'tokens', values: tokens };
  return { unit: 'characters', values: samples.map((s) => s.completion.length) };
}
