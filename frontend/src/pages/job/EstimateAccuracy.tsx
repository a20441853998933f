import { useEffect, useState } from 'react';
import type { ApiClient } from '../../api/client';
import { isAbort } from '../../api/client';
import type { JobAccuracy } from '../../api/estimate';
import { formatDuration } from '../submit/estimate';

/** `+12%` / `-8%`: (estimate - actual) / actual; `n/a` where there is nothing to compare. */
export function formatError(error: number | null): string {
  if (error === null) return 'n/a';
  const percent = Math.round(error * 100);
  return `${percent >= 0 ? '+' : ''}${percent}%`;
}

/** An ended job's estimate beside what its run did, with the error; nothing while it runs. */
export function EstimateAccuracy({ api, jobId, terminal }: { api: ApiClient; jobId: string; terminal: boolean }) {
  const [found, setFound] = useState<JobAccuracy | null>(null);

  useEffect(() => {
    if (!terminal) return undefined;
    const controller = new AbortController();
    api
      .getJobAccuracy(jobId, controller.signal)
      .then(setFound)
      .catch((e: unknown) => {
        if (!isAbort(e)) setFound(null); // no finished step: there is nothing to compare
      });
    return () => controller.abort();
  }, [api, jobId, terminal]);

  if (found === null) return null;
  const { estimate, actual, error } = found;
  const rows: [string, string, string, string, number | null][] = [
    ['step', 'Time per step', formatDuration(estimate.step_s), formatDuration(actual.step_s), error.step_s],
    [
      'idle',
      'Per step, idle cluster',
      formatDuration(estimate.idle_cluster_step_s),
      formatDuration(actual.step_s),
      error.idle_cluster_step_s,
    ],
    ['gpu-hours', 'GPU-hours', estimate.gpu_hours.toFixed(2), actual.gpu_hours.toFixed(2), error.gpu_hours],
    [
      'idle-gpu-hours',
      'GPU-hours, idle cluster',
      estimate.idle_cluster_gpu_hours.toFixed(2),
      actual.gpu_hours.toFixed(2),
      error.idle_cluster_gpu_hours,
    ],
  ];
  return (
    <section className="panel estimate-accuracy" data-testid="estimate-accuracy" aria-labelledby="accuracy-title">
      <h2 id="accuracy-title">Estimate against the run</h2>
      <table className="accuracy-table">
        <thead>
          <tr>
            <th scope="col">Figure</th>
            <th scope="col">Estimated</th>
            <th scope="col">Actual</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(([key, label, estimated, actualValue, err]) => (
            <tr key={key} data-testid={`accuracy-${key}`}>
              <th scope="row">{label}</th>
              <td>{estimated}</td>
              <td>{actualValue}</td>
              <td>{formatError(err)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted hint">
        Error is (estimated - actual) / actual over {actual.steps} steps: + when the run took less. The estimate is
        made on the job&apos;s own GPUs; on an idle cluster idle GPUs are lent to it, faster and billed.
        {!actual.complete && ' The run did not finish, so its GPU-hours are not compared.'}
      </p>
    </section>
  );
}
