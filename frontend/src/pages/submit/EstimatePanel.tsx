import { useEffect, useState } from 'react';
import type { ApiClient } from '../../api/client';
import { isAbort } from '../../api/client';
import { ApiError } from '../../api/errors';
import {
  ESTIMATE_DEBOUNCE_MS,
  formatCost,
  formatDuration,
  formatQueueWait,
  formatRecord,
  specToEstimate,
  type JobEstimate,
} from './estimate';

type EstimateState =
  | { kind: 'idle' }
  | { kind: 'ready'; estimate: JobEstimate }
  | { kind: 'failed'; error: ApiError };

/**
 * The estimate of the spec being edited, asked again `ESTIMATE_DEBOUNCE_MS` after the last
 * edit; an answer for an older text is dropped (its request is aborted), so what shows is
 * always the estimate of the text as it stands or, while one is on its way, the previous one.
 */
function useEstimate(api: ApiClient, specText: string): { state: EstimateState; pending: boolean } {
  const [state, setState] = useState<EstimateState>({ kind: 'idle' });
  const [pending, setPending] = useState(false);

  useEffect(() => {
    const spec = specToEstimate(specText);
    if (spec === null) {
      setPending(false);
      return undefined; // not JSON yet: keep the last estimate; the submit checks the text
    }
    const controller = new AbortController();
    setPending(true);
    const timer = window.setTimeout(() => {
      api
        .estimateJob({ name: '', spec }, controller.signal)
        .then((estimate) => setState({ kind: 'ready', estimate }))
        .catch((e: unknown) => {
          if (isAbort(e)) return;
          setState({ kind: 'failed', error: e instanceof ApiError ? e : new ApiError(0, 'error', String(e)) });
        })
        .finally(() => {
          if (!controller.signal.aborted) setPending(false);
        });
    }, ESTIMATE_DEBOUNCE_MS);
    return () => {
      window.clearTimeout(timer);
      controller.abort();
    };
  }, [api, specText]);

  return { state, pending };
}

/** Beside the submit form: what the spec would take, cost and wait, updated as it is edited. */
export function EstimatePanel({ api, spec }: { api: ApiClient; spec: string }) {
  const { state, pending } = useEstimate(api, spec);
  return (
    <section className="estimate-panel" data-testid="estimate" aria-live="polite" aria-busy={pending}>
      <h2>
        Estimate {pending && <span className="muted estimate-pending">(updating…)</span>}
      </h2>
      {state.kind === 'idle' && <p className="muted">Estimating…</p>}
      {state.kind === 'failed' && (
        <div data-testid="estimate-error">
          <p>No estimate: {state.error.message}</p>
          {state.error.details.length > 0 && (
            <ul>
              {state.error.details.map((d, i) => (
                <li key={`${d.field}:${i}`}>
                  {d.field && <code className="field-path">{d.field}</code>} {d.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {state.kind === 'ready' && <EstimateTable estimate={state.estimate} />}
    </section>
  );
}

function EstimateTable({ estimate }: { estimate: JobEstimate }) {
  const rows: [string, string, string][] = [
    ['step', 'Per step', formatDuration(estimate.step_s)],
    ['total', 'Total', `${formatDuration(estimate.total_s)} for ${estimate.steps} steps`],
    ['idle', 'On an idle cluster', formatDuration(estimate.idle_cluster.total_s)],
    ['gpu-hours', 'GPU-hours', `${estimate.gpu_hours.toFixed(2)} (${estimate.num_gpus} ${estimate.device_type})`],
    ['cost', 'Cost', formatCost(estimate)],
    ['queue', 'Queue wait', formatQueueWait(estimate)],
    ['record', 'Past error', formatRecord(estimate.record)],
  ];
  const price = estimate.cost.price_source === 'tenant' ? "your tenant's price" : "the service's price";
  return (
    <>
      <dl className="estimate-figures">
        {rows.map(([key, label, value]) => (
          <div key={key}>
            <dt>{label}</dt>
            <dd data-testid={`estimate-${key}`}>{value}</dd>
          </div>
        ))}
      </dl>
      {estimate.blockers.length > 0 && (
        <ul className="estimate-blockers" data-testid="estimate-blockers" role="alert">
          {estimate.blockers.map((b, i) => (
            <li key={`${b.field}:${i}`}>
              <strong>Blocked ({b.code}):</strong> {b.message}
            </li>
          ))}
        </ul>
      )}
      {estimate.warnings.map((w, i) => (
        <p key={`${w.field}:${i}`} className="estimate-warning">
          {w.message}
        </p>
      ))}
      <p className="muted hint">
        The simulator ran {estimate.simulated_steps} of {estimate.steps} steps on the job&apos;s own GPUs (a busy
        cluster); idle GPUs lent to it make it faster. Times are the cluster&apos;s seconds; past error is the median
        over your tenant&apos;s last finished jobs (+: they took less than estimated). Cost at {estimate.cost.gpu_hour_price} {estimate.cost.currency} per GPU-hour ({price}).
      </p>
    </>
  );
}
