// The job page's server state lives in the query cache; the event stream writes into the
// same entries the REST reads fill, so the page shows one job, one set of curves and one
// events list whichever of the two brought the latest news.

import type { QueryClient } from '@tanstack/react-query';
import type { Job, JobEvent, JobStatus } from '../../api/types';
import { applyMetricEvents, type SeriesMap } from '../../charts/series';
import { mergeEvents } from '../../live/eventLog';
import { queryKeys } from '../../query/keys';
import { keepLatestProgress, progressFromEvents } from './progress';

/**
 * A fetched job (a GET, or an action's answer) merged with the cached one: the step never
 * goes back, and a response that left the server before the newest status event shown
 * (its `last_event_seq` is lower) keeps that event's status.
 */
export function mergeJobResponse(cached: Job | undefined, fresh: Job): Job {
  if (!cached) return fresh;
  const progress = keepLatestProgress(cached.progress, fresh.progress);
  if (fresh.last_event_seq < cached.last_event_seq) {
    return {
      ...fresh,
      progress,
      status: cached.status,
      status_reason: cached.status_reason,
      last_event_seq: cached.last_event_seq,
    };
  }
  return { ...fresh, progress };
}

/** The cached job after a batch: the newest status event not yet reflected, and the step. */
export function applyEventsToJob(job: Job, batch: readonly JobEvent[]): Job {
  let next = job;
  for (const e of batch) {
    if (e.kind !== 'status' || e.seq <= next.last_event_seq) continue;
    next = { ...next, status: e.data.status as JobStatus, status_reason: e.data.reason, last_event_seq: e.seq };
  }
  const progress = progressFromEvents(next.progress, batch);
  return progress === next.progress ? next : { ...next, progress };
}

/**
 * Write a batch of stream events into the cache of job `jobId`: the events list, the
 * metric curves (`maxPoints` names the history query they extend), the status and step.
 * Answers whether a new status event arrived, so the caller can refetch what a status change
 * touches (timestamps, usage, checkpoints) rather than poll for it.
 */
export function applyStreamBatch(
  client: QueryClient,
  where: { tenant: string; jobId: string; maxPoints: number },
  batch: readonly JobEvent[],
): { statusChanged: boolean } {
  const { tenant, jobId, maxPoints } = where;
  client.setQueryData<JobEvent[]>(queryKeys.events(tenant, jobId), (prev) => mergeEvents(prev ?? [], batch));
  if (batch.some((e) => e.kind === 'metrics')) {
    client.setQueryData<SeriesMap>(queryKeys.metrics(tenant, jobId, maxPoints), (prev) =>
      applyMetricEvents(prev ?? {}, batch),
    );
  }
  let statusChanged = false;
  client.setQueryData<Job>(queryKeys.job(tenant, jobId), (prev) => {
    if (!prev) return prev;
    const next = applyEventsToJob(prev, batch);
    statusChanged = next.last_event_seq !== prev.last_event_seq;
    return next;
  });
  return { statusChanged };
}
