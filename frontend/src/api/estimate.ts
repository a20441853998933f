import type { components } from './schema';

/** `POST /api/v1/jobs/estimate`'s answer, as the server's schema describes it. */
export type JobEstimate = components['schemas']['JobEstimateOutput'];
