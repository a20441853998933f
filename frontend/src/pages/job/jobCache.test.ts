import { QueryClient } from '@tanstack/react-query';
import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../../api/client';
import type { Job, JobEvent, MetricsResponse } from '../../api/types';
import type { SeriesMap } from '../../charts/series';
import { queryKeys } from '../../query/keys';
import { applyStreamBatch, mergeJobResponse } from './jobCache';
import { metricsQuery } from './jobQueries';

const T = 'acme';
const ID = 'job-1';
const POINTS = 500;
const where = { tenant: T, jobId: ID, maxPoints: POINTS };

function job(over: Partial<Job> = {}): Job {
  return {
    id: ID, name: 'grpo', tenant: T, status: 'running', status_reason: '', queue_position: null,
    progress: { step: 3, total_steps: 10 }, failure_class: '', engine_mode: 'simulated', num_gpus: 1,
    device_type: '', priority: 0, tags: [], attempt: 1, borrowed: false, gpu_seconds: 0, cloned_from: null,
    last_event_seq: 10, spec: {}, resolved_spec: {}, created_at: '', started_at: null, finished_at: null,
    ...over,
  };
}

const metrics = (seq: number, step: number, reward: number): JobEvent => ({
  seq, created_at: '', kind: 'metrics', data: { step, metrics: { 'critic/score/mean': reward } },
});
const status = (seq: number, value: string, reason = ''): JobEvent => ({
  seq, created_at: '', kind: 'status', data: { status: value, reason },
});

describe('the stream writes into the query cache', () => {
  it('adds live points to the cached curves and moves the step on', () => {
    const client = new QueryClient();
    client.setQueryData(queryKeys.job(T, ID), job());
    client.setQueryData<SeriesMap>(queryKeys.metrics(T, ID, POINTS), { 'critic/score/mean': [[3, 0.1]] });

    const { statusChanged } = applyStreamBatch(client, where, [metrics(11, 4, 0.2), metrics(12, 5, 0.3)]);

    expect(statusChanged).toBe(false);
    expect(client.getQueryData<SeriesMap>(queryKeys.metrics(T, ID, POINTS))!['critic/score/mean']).toEqual([
      [3, 0.1], [4, 0.2], [5, 0.3],
    ]);
    expect(client.getQueryData<Job>(queryKeys.job(T, ID))!.progress.step).toBe(5);
    expect(client.getQueryData<JobEvent[]>(queryKeys.events(T, ID))!.map((e) => e.seq)).toEqual([11, 12]);
  });

  it('shows a new status at once and says so; a replayed older one changes nothing', () => {
    const client = new QueryClient();
    client.setQueryData(queryKeys.job(T, ID), job());

    expect(applyStreamBatch(client, where, [status(4, 'queued')]).statusChanged).toBe(false);
    expect(client.getQueryData<Job>(queryKeys.job(T, ID))!.status).toBe('running');

    expect(applyStreamBatch(client, where, [status(11, 'paused', 'by alice')]).statusChanged).toBe(true);
    const shown = client.getQueryData<Job>(queryKeys.job(T, ID));
    expect(shown).toMatchObject({ status: 'paused', status_reason: 'by alice' });
  });

  it('does not let a response sent before the newest status event undo it', () => {
    const client = new QueryClient();
    client.setQueryData(queryKeys.job(T, ID), job());
    applyStreamBatch(client, where, [metrics(11, 6, 0.5), status(12, 'succeeded')]);
    const cached = client.getQueryData<Job>(queryKeys.job(T, ID));

    const sentBefore = job({ last_event_seq: 11, status: 'running', progress: { step: 5, total_steps: 10 }, gpu_seconds: 9 });
    const stale = mergeJobResponse(cached, sentBefore);
    expect(stale).toMatchObject({ status: 'succeeded', gpu_seconds: 9, progress: { step: 6 } });

    const fresh = mergeJobResponse(cached, job({ last_event_seq: 12, status: 'succeeded', finished_at: 'now' }));
    expect(fresh).toMatchObject({ status: 'succeeded', finished_at: 'now' });
  });

  it('keeps the live points that arrived while the metric history was loading', async () => {
    const client = new QueryClient();
    let answer!: (res: MetricsResponse) => void;
    const api = {
      getMetricHistory: () => new Promise<MetricsResponse>((resolve) => (answer = resolve)),
    } as unknown as ApiClient;

    const loading = client.fetchQuery(metricsQuery({ api, client, tenant: T, jobId: ID }, POINTS));
    applyStreamBatch(client, where, [metrics(20, 9, 0.9)]);
    answer({ series: { 'critic/score/mean': [[1, 0.0], [8, 0.8]] } });

    expect((await loading)['critic/score/mean']).toEqual([[1, 0.0], [8, 0.8], [9, 0.9]]);
    expect(client.getQueryData<SeriesMap>(queryKeys.metrics(T, ID, POINTS))!['critic/score/mean']).toHaveLength(3);
  });
});
