// Which step the samples panel shows, and pairing one prompt's completions at two steps.

import type { Sample } from '../../api/types';

/** The steps that have samples, oldest first (the slider's order). */
export function stepsWithSamples(samples: readonly Sample[]): number[] {
  return [...new Set(samples.map((s) => s.step))].sort((a, b) => a - b);
}

/**
 * The step to show. `chosen` null follows the newest step as new ones arrive; a chosen step
 * that is no longer stored (the API keeps the latest steps only) gives way to the nearest one.
 */
export function resolveStep(steps: readonly number[], chosen: number | null): number | null {
  if (chosen === null) return steps.at(-1) ?? null;
  let best: number | null = null;
  for (const s of steps) if (best === null || Math.abs(s - chosen) < Math.abs(best - chosen)) best = s;
  return best;
}

/** What moving the slider to `index` chooses: its step, or null (follow the newest) at the end. */
export function chooseStepAt(steps: readonly number[], index: number): number | null {
  if (index >= steps.length - 1) return null;
  return steps[Math.max(0, index)] ?? null;
}

export interface PromptPair {
  prompt: string;
  left: Sample[];
  right: Sample[];
}

/** The prompts sampled at both steps, each with its completions at either step, in `left`'s order. */
export function pairByPrompt(left: readonly Sample[], right: readonly Sample[]): PromptPair[] {
  const rightByPrompt = new Map<string, Sample[]>();
  for (const s of right) rightByPrompt.set(s.prompt, [...(rightByPrompt.get(s.prompt) ?? []), s]);
  const pairs: PromptPair[] = [];
  const seen = new Set<string>();
  for (const s of left) {
    const matches = rightByPrompt.get(s.prompt);
    if (!matches || seen.has(s.prompt)) continue;
    seen.add(s.prompt);
    pairs.push({ prompt: s.prompt, left: left.filter((l) => l.prompt === s.prompt), right: matches });
  }
  return pairs;
}
