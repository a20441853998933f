import { useQuery } from '@tanstack/react-query';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { useSession } from '../../session';
import { formatReward, groupSamplesByStep, rewardTone } from './samples';

const REFRESH_MS = 10_000;

/**
 * Sampled completions with their rewards (GET /samples), newest step first: the newest
 * step open, older ones collapsed. Only jobs trained in real mode report samples.
 */
export function SamplesPanel({ jobId, terminal }: { jobId: string; terminal: boolean }) {
  const { api, tenant } = useSession();
  // Polled while the job runs; a finished job's are loaded once.
  const samplesQuery = useQuery({
    queryKey: queryKeys.samples(tenant.slug, jobId),
    queryFn: ({ signal }) => api.listSamples(jobId, {}, signal),
    refetchInterval: terminal ? false : REFRESH_MS,
  });
  const samples = samplesQuery.data ?? null;
  const error = samplesQuery.error ? asApiError(samplesQuery.error).message : '';

  const groups = samples ? groupSamplesByStep(samples) : [];

  return (
    <section className="samples" aria-labelledby="samples-title" data-testid="samples-panel">
      <div className="section-head">
        <h2 id="samples-title">Samples</h2>
        {groups.length > 0 && (
          <span className="muted">
            latest {groups.length} step{groups.length === 1 ? '' : 's'}
          </span>
        )}
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not load the samples: {error}
        </div>
      )}
      {samples === null ? (
        !error && <p className="muted">Loading samples…</p>
      ) : groups.length === 0 ? (
        <div className="empty samples-empty" data-testid="samples-empty">
          <p>No sampled completions.</p>
          <p className="muted">
            Only jobs trained for real (the service running with <code>ENGINE_MODE=real</code>) record prompts,
            completions and rewards; simulated jobs report metrics only.
            {!terminal && ' A real job shows its first samples after its first step.'}
          </p>
        </div>
      ) : (
        <div className="sample-groups">
          {groups.map((group, gi) => (
            <details
              key={group.step}
              className="sample-group"
              open={gi === 0}
              data-testid="sample-group"
              data-step={group.step}
            >
              <summary>
                <span className="sample-step">Step {group.step}</span>
                <span className="muted">
                  {group.samples.length} sample{group.samples.length === 1 ? '' : 's'} · mean reward{' '}
                  {formatReward(group.meanReward)}
                </span>
              </summary>
              <div className="sample-list">
                {group.samples.map((s, i) => (
                  <article
                    key={i}
                    className="sample"
                    data-testid="sample"
                    aria-label={`Step ${s.step}, sample ${i + 1}`}
                  >
                    <header className="sample-head">
                      <span className={`reward reward-${rewardTone(s.reward)}`} data-testid="sample-reward">
                        reward {formatReward(s.reward)}
                      </span>
                      <span className="muted">
                        {s.turns} turn{s.turns === 1 ? '' : 's'}
                      </span>
                      {s.answer && (
                        <span className="sample-answer">
                          expected answer <code>{s.answer}</code>
                        </span>
                      )}
                    </header>
                    {s.reward_error && (
                      <p className="sample-reward-error" role="note" data-testid="sample-reward-error">
                        Not scored: {s.reward_error}
                      </p>
                    )}
                    <div className="sample-body">
                      <div className="sample-text">
                        <h3>Prompt</h3>
                        <pre tabIndex={0}>{s.prompt}</pre>
                      </div>
                      <div className="sample-text">
                        <h3>Completion</h3>
                        <pre tabIndex={0}>{s.completion}</pre>
                      </div>
                    </div>
                  </article>
                ))}
              </div>
            </details>
          ))}
        </div>
      )}
    </section>
  );
}
