/**
 * The hand-written API types the pages use (`types.ts`), checked at compile time against the
 * types generated from the server's OpenAPI schema (`schema.d.ts`, from `openapi.json`): a
 * field the server renames or drops, or a status it adds, breaks `tsc` rather than a page at
 * run time. Regenerate both files with `make api-types`; a test fails when they are stale.
 */
import type { components } from './schema';
import type {
  Checkpoint,
  ClusterSpan,
  ClusterStep,
  ClusterTimeline,
  Dataset,
  EngineMode,
  Job,
  JobProgress,
  JobStatus,
  LogLine,
  Me,
  Preset,
  Sample,
  VerlEstimate,
} from './types';

type Schemas = components['schemas'];

/** `true` when every field of `Ours` is a field of `Theirs`. */
type FieldsIn<Ours, Theirs> = [Exclude<keyof Ours, keyof Theirs>] extends [never] ? true : false;
/** `true` when `A` and `B` are the same set of values. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;

export type ApiContract = [
  Holds<FieldsIn<Job, Schemas['JobOutput']>>,
  Holds<FieldsIn<JobProgress, Schemas['ProgressOutput']>>,
  Holds<Same<JobStatus, Schemas['StatusEnum']>>,
  Holds<Same<EngineMode, Schemas['EngineModeEnum']>>,
  Holds<FieldsIn<Checkpoint, Schemas['CheckpointOutput']>>,
  Holds<FieldsIn<LogLine, Schemas['LogLineOutput']>>,
  Holds<FieldsIn<Sample, Schemas['SampleOutput']>>,
  Holds<FieldsIn<Dataset, Schemas['DatasetOutput']>>,
  Holds<FieldsIn<Me, Schemas['MeOutput']>>,
  Holds<FieldsIn<Preset, Schemas['PresetOutput']>>,
  Holds<FieldsIn<ClusterTimeline, Schemas['ClusterTimelineOutput']>>,
  Holds<FieldsIn<ClusterSpan, Schemas['ClusterSpanOutput']>>,
  Holds<FieldsIn<ClusterStep, Schemas['ClusterStepOutput']>>,
  Holds<FieldsIn<VerlEstimate, Schemas['VerlEstimateOutput']>>,
];
