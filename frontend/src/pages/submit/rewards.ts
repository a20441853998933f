import type { InstalledReward } from '../../api/rewards';
import { parsedSpec } from './models';

/** The reward the spec text names (`data.grader`), `numeric` when it names none; null when the
 * text is not a JSON object yet. */
export function specReward(specText: string): string | null {
  const spec = parsedSpec(specText);
  if (!spec) return null;
  const data = spec.data;
  const grader = typeof data === 'object' && data !== null ? (data as Record<string, unknown>).grader : undefined;
  return typeof grader === 'string' ? grader : 'numeric';
}

/** The spec text with `data.grader` set to `name`, the rest of `data` kept; null when the text is
 * not a JSON object. */
export function withReward(specText: string, name: string): string | null {
  const spec = parsedSpec(specText);
  if (!spec) return null;
  const data = typeof spec.data === 'object' && spec.data !== null ? (spec.data as Record<string, unknown>) : {};
  return JSON.stringify({ ...spec, data: { ...data, grader: name } }, null, 2);
}

/** What the picker says of a reward beside its name: its limit per reply and who installed it. */
export function rewardDetail(reward: InstalledReward): string {
  const limit = reward.time_limit_s === null ? 'in-process' : `${reward.time_limit_s} s per reply`;
  return `${limit}, ${reward.builtin ? 'built in' : 'installed'}`;
}
