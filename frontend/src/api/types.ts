// Shapes of the JigsawRL HTTP and WebSocket API (/api/v1, /ws/jobs/<id>/).

export type TenantRole = 'owner' | 'member' | 'viewer';

export interface TenantMembership {
  slug: string;
  name: string;
  role: TenantRole;
}

export interface Me {
  username: string;
  is_staff: boolean;
  tenants: TenantMembership[];
}

export const JOB_STATUSES = [
  'queued',
  'starting',
  'running',
  'recovering',
  'pausing',
  'paused',
  'cancelling',
  'succeeded',
  'failed',
  'cancelled',
] as const;

export type JobStatus = (typeof JOB_STATUSES)[number];

const TERMINAL: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled']);

/** A job in one of these states will not change again; it has nothing to cancel. */
export function isTerminal(status: string): boolean {
  return TERMINAL.has(status);
}

export interface JobProgress {
  step: number;
  total_steps: number;
}

export interface Job {
  id: string;
  name: string;
  tenant: string;
  status: JobStatus;
  status_reason: string;
  queue_position: number | null;
  progress: JobProgress;
  /** Why a failed job failed: validation, user_code, out_of_memory, system, capacity, quota; else "". */
  failure_class: string;
  num_gpus: number;
  /** e.g. "h100"; "" when the job takes any device. */
  device_type: string;
  /** Higher is admitted first (capped by the tenant's quota). */
  priority: number;
  tags: string[];
  /** How many times the job was handed to the engine (a resume or a recovery adds one). */
  attempt: number;
  /** Admitted on capacity beyond its tenant's guarantee: it may be paused to give it back. */
  borrowed: boolean;
  /** GPU time billed so far, in GPU-seconds. */
  gpu_seconds: number;
  /** The job this one was cloned from, if any. */
  cloned_from: string | null;
  last_event_seq: number;
  spec: Record<string, unknown>;
  /** The spec with every default filled in. */
  resolved_spec: Record<string, unknown>;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface Page<T> {
  results: T[];
  next: string | null;
  previous: string | null;
}

export interface Preset {
  name: string;
  title: string;
  spec: Record<string, unknown>;
}

/** One metric series: [step, value] pairs, in increasing step order. */
export type Point = [number, number];

export interface MetricsResponse {
  series: Record<string, Point[]>;
}

export interface StatusEventData {
  status: string;
  reason: string;
}

export interface MetricsEventData {
  step: number;
  metrics: Record<string, number>;
}

export interface LogEventData {
  level: string;
  message: string;
}

interface EventBase {
  seq: number;
  created_at: string;
}

export type JobEvent =
  | (EventBase & { kind: 'status'; data: StatusEventData })
  | (EventBase & { kind: 'metrics'; data: MetricsEventData })
  | (EventBase & { kind: 'log'; data: LogEventData });

export interface FieldError {
  field: string;
  message: string;
}

// -- job page: checkpoints, logs, samples, clone ----------------------------------------

/** GET /jobs/<id>/checkpoints: a step the job can be cloned (or resumed) from. */
export interface Checkpoint {
  step: number;
  created_at: string;
}

/** One line of GET /jobs/<id>/logs. */
export interface LogLine {
  seq: number;
  created_at: string;
  level: string;
  message: string;
}

/** GET /jobs/<id>/logs?after=<seq>: lines after the cursor; `next_after` is null when none. */
export interface LogsPage {
  results: LogLine[];
  next_after: number | null;
}

/** One sampled completion of GET /jobs/<id>/samples (real-mode jobs only). */
export interface Sample {
  step: number;
  prompt: string;
  completion: string;
  answer: string;
  reward: number;
  turns: number;
}

/** POST /jobs/<id>/clone. No `checkpoint_step`: the latest that leaves work; 0: from scratch. */
export interface CloneJobInput {
  name: string;
  checkpoint_step?: number;
  overrides: Record<string, unknown>;
}
