import type { components } from './schema';

/** `POST /api/v1/jobs/estimate`'s answer, as the server's schema describes it. */
export type JobEstimate = components['schemas']['JobEstimateOutput'];

/** `GET /api/v1/jobs/<id>/estimate`: an ended job's estimate beside its run. */
export type JobAccuracy = components['schemas']['JobAccuracyOutput'];
