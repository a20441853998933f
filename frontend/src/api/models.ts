import type { components } from './schema';

/** `GET /api/v1/models`: a model a spec may name here, as the spec spells it. */
export type TrainableModel = components['schemas']['ModelOutput'];
