import { useId, useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import type { Sample } from '../../api/types';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { useSession } from '../../session';
import { HistogramChart } from './HistogramChart';
import { histogram } from './histogram';
import { formatReward, groupSamplesByStep, responseLengths, rewardTone } from './samples';
import { chooseStepAt, pairByPrompt, resolveStep, stepsWithSamples } from './sampleSteps';

const REFRESH_MS = 10_000;

/**
 * Sampled completions with their rewards (GET /samples), one step at a time with a slider:
 * the step's reward and response-length distributions, its samples, and optionally the
 * same prompts' completions at another step beside them. Only real-mode jobs report samples.
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
  const steps = samples ? stepsWithSamples(samples) : [];

  return (
    <section className="samples" aria-labelledby="samples-title" data-testid="samples-panel">
      <div className="section-head">
        <h2 id="samples-title">Samples</h2>
        {steps.length > 0 && (
          <span className="muted">
            latest {steps.length} step{steps.length === 1 ? '' : 's'} stored
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
      ) : steps.length === 0 ? (
        <div className="empty samples-empty" data-testid="samples-empty">
          <p>No sampled completions.</p>
          <p className="muted">
            Only jobs trained for real (the service running with <code>ENGINE_MODE=real</code>) record prompts,
            completions and rewards; simulated jobs report metrics only.
            {!terminal && ' A real job shows its first samples after its first step.'}
          </p>
        </div>
      ) : (
        <StepBrowser samples={samples} steps={steps} />
      )}
    </section>
  );
}

function StepBrowser({ samples, steps }: { samples: Sample[]; steps: number[] }) {
  const sliderId = useId();
  const compareId = useId();
  // null: follow the newest step as the job reports more.
  const [chosen, setChosen] = useState<number | null>(null);
  const [compareWith, setCompareWith] = useState<number | null>(null);
  const step = resolveStep(steps, chosen);
  const groups = groupSamplesByStep(samples);
  const group = groups.find((g) => g.step === step);
  if (step === null || !group) return null;
  const index = steps.indexOf(step);
  const otherStep = compareWith !== null && compareWith !== step ? resolveStep(steps, compareWith) : null;
  const other = otherStep !== null && otherStep !== step ? groups.find((g) => g.step === otherStep) : undefined;
  const n = group.samples.length;
  const ofStored = `of the ${n} stored sample${n === 1 ? '' : 's'}`;
  const lengths = responseLengths(group.samples);

  return (
    <div className="sample-browser">
      <div className="sample-controls">
        <label htmlFor={sliderId}>Step</label>
        <input
          id={sliderId}
          type="range"
          min={0}
          max={steps.length - 1}
          step={1}
          value={index}
          disabled={steps.length < 2}
          aria-valuetext={`Step ${step}`}
          data-testid="sample-step-slider"
          onChange={(e) => setChosen(chooseStepAt(steps, Number(e.target.value)))}
        />
        <output htmlFor={sliderId} className="sample-step" data-testid="sample-step">
          Step {step}
        </output>
        <span className="muted">
          {chosen === null ? 'following the newest step' : `stored steps ${steps[0] ?? ''}–${steps.at(-1) ?? ''}`}
        </span>
        <label htmlFor={compareId}>Compare with</label>
        <select
          id={compareId}
          value={compareWith ?? ''}
          data-testid="sample-compare-select"
          onChange={(e) => setCompareWith(e.target.value === '' ? null : Number(e.target.value))}
        >
          <option value="">no other step</option>
          {steps
            .filter((s) => s !== step)
            .map((s) => (
              <option key={s} value={s}>
                step {s}
              </option>
            ))}
        </select>
      </div>

      <div className="sample-distributions" data-testid="sample-distributions">
        <HistogramChart
          title={`Reward at step ${step}, ${ofStored}`}
          xLabel="reward"
          histogram={histogram(group.samples.map((s) => s.reward))}
          testId="reward-histogram"
        />
        <HistogramChart
          title={`Response length at step ${step}, ${ofStored}`}
          xLabel={`response length (${lengths.unit})`}
          histogram={histogram(lengths.values, 8)}
          testId="length-histogram"
        />
        <p className="muted sample-distributions-note">
          A job stores a few completions per step for reading, not its whole batch: the batch&apos;s mean
          reward and response length are the <code>critic/score/mean</code> and <code>response_length/mean</code>{' '}
          charts. Mean reward here: {formatReward(group.meanReward)}.
        </p>
      </div>

      {other ? (
        <ComparedSteps left={group.samples} right={other.samples} leftStep={step} rightStep={other.step} />
      ) : (
        <div className="sample-list" data-testid="sample-group" data-step={step}>
          {group.samples.map((s, i) => (
            <SampleCard key={i} sample={s} label={`Step ${s.step}, sample ${i + 1}`} />
          ))}
        </div>
      )}
    </div>
  );
}

function ComparedSteps({
  left,
  right,
  leftStep,
  rightStep,
}: {
  left: Sample[];
  right: Sample[];
  leftStep: number;
  rightStep: number;
}) {
  const pairs = pairByPrompt(left, right);
  if (pairs.length === 0) {
    return (
      <p className="muted" data-testid="sample-compare-none">
        No prompt was sampled at both step {leftStep} and step {rightStep}.
      </p>
    );
  }
  return (
    <div className="sample-compare" data-testid="sample-compare">
      {pairs.map((pair, pi) => (
        <article key={pi} className="sample" data-testid="sample-pair">
          <div className="sample-text">
            <h3>Prompt</h3>
            <pre tabIndex={0}>{pair.prompt}</pre>
          </div>
          <div className="sample-body">
            {[
              { step: leftStep, list: pair.left },
              { step: rightStep, list: pair.right },
            ].map(({ step, list }) => (
              <div key={step} className="sample-text" data-testid="sample-compare-side" data-step={step}>
                <h3>Step {step}</h3>
                {list.map((s, i) => (
                  <div key={i} className="sample-compare-reply">
                    <SampleHead sample={s} />
                    <pre tabIndex={0}>{s.completion}</pre>
                  </div>
                ))}
              </div>
            ))}
          </div>
        </article>
      ))}
    </div>
  );
}

function SampleHead({ sample: s }: { sample: Sample }) {
  return (
    <header className="sample-head">
      <span className={`reward reward-${rewardTone(s.reward)}`} data-testid="sample-reward">
        reward {formatReward(s.reward)}
      </span>
      <span className="muted">
        {s.turns} turn{s.turns === 1 ? '' : 's'}
      </span>
      {typeof s.response_tokens === 'number' && (
        <span className="muted" data-testid="sample-tokens">
          {s.response_tokens} token{s.response_tokens === 1 ? '' : 's'}
        </span>
      )}
      {s.answer && (
        <span className="sample-answer">
          expected answer <code>{s.answer}</code>
        </span>
      )}
    </header>
  );
}

function SampleCard({ sample: s, label }: { sample: Sample; label: string }) {
  return (
    <article className="sample" data-testid="sample" aria-label={label}>
      <SampleHead sample={s} />
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
  );
}
