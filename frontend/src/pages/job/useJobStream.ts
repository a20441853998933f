import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { isTerminal, type Job } from '../../api/types';
import { JobStream, type StreamState } from '../../live/jobStream';
import { queryKeys } from '../../query/keys';
import { useSession } from '../../session';
import { applyStreamBatch } from './jobCache';

/**
 * Keep job `jobId`'s cache entries live from its event stream; answers the stream's state.
 * after=0 replays the stored history of the kinds the events list needs (the metric
 * history comes downsampled over REST), then stays live for all. A new status event
 * refetches the job and its checkpoints (a pause records one) instead of polling them.
 */
export function useJobStream(jobId: string, maxPoints: number): StreamState {
  const { tenant } = useSession();
  const client = useQueryClient();
  const [state, setState] = useState<StreamState>('connecting');

  useEffect(() => {
    const jobKey = queryKeys.job(tenant.slug, jobId);
    const live = new JobStream({
      jobId,
      after: 0,
      replayKinds: ['status', 'log', 'samples'],
      onEvents: (batch) => {
        const { statusChanged } = applyStreamBatch(client, { tenant: tenant.slug, jobId, maxPoints }, batch);
        if (!statusChanged) return;
        void client.invalidateQueries({ queryKey: jobKey, exact: true });
        void client.invalidateQueries({ queryKey: queryKeys.checkpoints(tenant.slug, jobId) });
      },
      onState: setState,
      shouldReconnect: () => {
        const job = client.getQueryData<Job>(jobKey);
        return !(job && isTerminal(job.status));
      },
    });
    // Deferred one tick: StrictMode's mount-unmount-mount in development would
    // otherwise open and at once abort a socket, which the browser logs.
    const timer = setTimeout(() => live.start(), 0);
    return () => {
      clearTimeout(timer);
      live.stop();
    };
  }, [client, tenant.slug, jobId, maxPoints]);

  return state;
}
