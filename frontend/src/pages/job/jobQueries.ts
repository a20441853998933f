// The reads of one job that more than one page makes (the job page, the compare page),
// built once so that both share a cache entry and its query function.

import { queryOptions, type QueryClient } from '@tanstack/react-query';
import type { ApiClient } from '../../api/client';
import type { Job } from '../../api/types';
import { mergeSeriesMaps, normalizeSeries, type SeriesMap } from '../../charts/series';
import { queryKeys } from '../../query/keys';
import { mergeJobResponse } from './jobCache';

interface JobRead {
  api: ApiClient;
  client: QueryClient;
  tenant: string;
  jobId: string;
}

/** The job, merged with what the stream already put in the cache (see mergeJobResponse). */
export function jobQuery({ api, client, tenant, jobId }: JobRead) {
  const key = queryKeys.job(tenant, jobId);
  return queryOptions({
    queryKey: key,
    queryFn: async ({ signal }) => mergeJobResponse(client.getQueryData<Job>(key), await api.getJob(jobId, signal)),
  });
}

/**
 * The metric history, each series downsampled on the server to at most `maxPoints`. The
 * stream adds live points to the same entry; an answer merges with them rather than
 * dropping the points that arrived while it was in flight. Fetched whenever a page opens
 * (the points since may not have been streamed), not on window focus.
 */
export function metricsQuery({ api, client, tenant, jobId }: JobRead, maxPoints: number) {
  const key = queryKeys.metrics(tenant, jobId, maxPoints);
  return queryOptions({
    queryKey: key,
    queryFn: async ({ signal }): Promise<SeriesMap> => {
      const res = await api.getMetricHistory(jobId, maxPoints, signal);
      return mergeSeriesMaps(normalizeSeries(res.series), client.getQueryData<SeriesMap>(key) ?? {});
    },
    staleTime: Infinity,
    refetchOnMount: 'always',
    refetchOnWindowFocus: false,
  });
}
