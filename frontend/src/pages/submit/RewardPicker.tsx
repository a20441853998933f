import type { ApiClient } from '../../api/client';
import { useListing } from './useListing';
import type { InstalledReward } from '../../api/rewards';
import { rewardDetail, specReward, withReward } from './rewards';

/** The spec's `data.grader`, picked from the rewards installed here (`GET /api/v1/rewards`),
 * with what the chosen one rewards and suits. */
export function RewardPicker({
  api,
  spec,
  onSpecChange,
}: {
  api: ApiClient;
  spec: string;
  onSpecChange: (text: string) => void;
}) {
  const { items: rewards, error: loadError } = useListing<InstalledReward>((signal) => api.listRewards(signal));

  if (loadError) return <p className="muted">Rewards unavailable: {loadError}. Name one as data.grader.</p>;
  if (rewards === null) return <p className="muted">Loading rewards…</p>;
  const current = specReward(spec);
  const chosen = rewards.find((r) => r.name === current);
  return (
    <>
      <select
        id="job-reward"
        data-testid="reward-select"
        aria-describedby="job-reward-help"
        value={chosen ? chosen.name : ''}
        onChange={(e) => {
          const text = withReward(spec, e.target.value);
          if (text !== null) onSpecChange(text);
        }}
      >
        {!chosen && (
          <option value="">{current === null ? 'Fix the spec to pick a reward' : `${current} (not installed)`}</option>
        )}
        {rewards.map((r) => (
          <option key={r.name} value={r.name}>
            {r.name} ({rewardDetail(r)})
          </option>
        ))}
      </select>
      <p id="job-reward-help" className="muted" data-testid="reward-help">
        {chosen ? `${chosen.description}. Suits: ${chosen.suits}.` : 'A reward the operator installed, by name.'}
      </p>
    </>
  );
}
