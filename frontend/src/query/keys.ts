// Query keys, one family per resource. Every key starts with the tenant (a job id means
// nothing under another tenant), so switching tenants never shows another tenant's data,
// and `['t', tenant, 'job', id]` prefixes everything cached for one job.

export const queryKeys = {
  /** Every page of every filter of the jobs list. */
  jobsLists: (tenant: string) => ['t', tenant, 'jobs'] as const,
  jobsList: (tenant: string, query: string, pageUrl: string | null) =>
    ['t', tenant, 'jobs', query, pageUrl] as const,
  job: (tenant: string, jobId: string) => ['t', tenant, 'job', jobId] as const,
  /** The metric history (downsampled to `maxPoints` per series) plus the live points since. */
  metrics: (tenant: string, jobId: string, maxPoints: number) =>
    ['t', tenant, 'job', jobId, 'metrics', maxPoints] as const,
  /** The job's events, fed by the stream only (the REST API has no events list). */
  events: (tenant: string, jobId: string) => ['t', tenant, 'job', jobId, 'events'] as const,
  checkpoints: (tenant: string, jobId: string) => ['t', tenant, 'job', jobId, 'checkpoints'] as const,
  logs: (tenant: string, jobId: string) => ['t', tenant, 'job', jobId, 'logs'] as const,
  samples: (tenant: string, jobId: string) => ['t', tenant, 'job', jobId, 'samples'] as const,
  cluster: (tenant: string, windowS: number) => ['t', tenant, 'cluster', windowS] as const,
  /** Staff pages act for no tenant. */
  admin: () => ['admin'] as const,
  adminTenants: () => ['admin', 'tenants'] as const,
  adminQueue: () => ['admin', 'queue'] as const,
  adminCluster: () => ['admin', 'cluster'] as const,
};
