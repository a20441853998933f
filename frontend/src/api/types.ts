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

/** `simulated`: the cost model's clock, nothing trained; `real`: a model was trained. */
export type EngineMode = 'simulated' | 'real';

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
  /** The engine mode it was submitted and run under. */
  engine_mode: EngineMode;
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
  /** Its model as a tar of a Hugging Face directory; null for a simulated job (no weights). */
  download_url: string | null;
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
  /** Tokens the model wrote over all turns; null in samples stored before it was recorded. */
  response_tokens?: number | null;
  /** Why the job's reward could not score this reply (it scored 0); empty when it scored. */
  reward_error?: string;
}

/** POST /jobs/<id>/clone. No `checkpoint_step`: the latest that leaves work; 0: from scratch. */
export interface CloneJobInput {
  name: string;
  checkpoint_step?: number;
  overrides: Record<string, unknown>;
}

// -- cluster page ------------------------------------------------------------------------

/** One sub-stage on the shared cluster. `job` is null for another tenant's work (unnamed). */
export interface ClusterSpan {
  job: string | null;
  job_name: string;
  kind: string;
  bucket: string | null;
  step: number;
  worker: number | null;
  devices: number[];
  start_s: number;
  end_s: number;
  share: number;
  running: boolean;
}

/** A step finished in the window: when it ran (first sub-stage to weight sync) and its work. */
export interface ClusterStep {
  job: string | null;
  job_name: string;
  step: number;
  start_s: number;
  end_s: number;
  tokens: number;
  /** Training-equivalent FLOPs, 6 x parameters x tokens. */
  flops: number;
}

/**
 * The window's finished steps against verl's estimated time for the same steps (same sampled
 * sequences, same cost model, verl's synchronous colocated layout; the better of its dedicated
 * and whole-cluster deployments). `speedup` is null when there is nothing to compare (`note`).
 */
export interface VerlEstimate {
  speedup: number | null;
  actual_s: number;
  verl_s: number;
  verl_dedicated_s: number;
  verl_serial_s: number;
  steps: number;
  tokens: number;
  note: string | null;
}

/** A device whose node left the cluster: nothing is placed there until a node joins again. */
export interface LostDevice {
  device: number;
  /** The node of the engine's cluster it belongs to. */
  node: number;
  reason: string;
  /** Engine seconds: when the engine marked it lost. */
  since_s: number;
}

/** GET /cluster/timeline?window_s=: the last `window_s` of the engine's clock. */
export interface ClusterTimeline {
  now_s: number;
  /** The mode of the engine whose cluster this is. */
  engine_mode: EngineMode;
  since_s: number;
  device_type: string;
  num_devices: number;
  /** One device's peak bf16 FLOP/s. */
  peak_flops: number;
  spans: ClusterSpan[];
  steps: ClusterStep[];
  verl_estimate: VerlEstimate;
  lost_devices: LostDevice[];
}

// -- datasets and grader dry runs --------------------------------------------------------

/** A tenant's uploaded JSONL dataset (GET /datasets); `ref` is what data.train_files takes. */
export interface Dataset {
  name: string;
  ref: string;
  rows: number;
  size_bytes: number;
  sha256: string;
  created_by: string | null;
  created_at: string;
}

export interface DatasetRow {
  line: number;
  prompt: string;
  answer: string;
}

/** GET /datasets/<name>: the metadata and the first rows. */
export interface DatasetDetail extends Dataset {
  preview: DatasetRow[];
}

export type GraderName = 'numeric' | 'exact_match' | 'math';

/** POST /graders/dry-run: a stored dataset's first rows, or rows sent inline. */
export interface DryRunInput {
  grader: GraderName;
  dataset?: string;
  rows?: { prompt: string; answer: string }[];
  /** One per row; default: each row's answer as `#### <answer>` (a perfect reply). */
  completions?: string[];
}

export interface DryRunResult {
  line: number;
  prompt: string;
  answer: string;
  completion: string;
  reward: number;
  /** Why the reward could not score this completion (it scored 0, as in training); empty when it scored. */
  reward_error?: string;
  /** Why this grader could never reward the row's answer; null when it can. */
  problem: string | null;
}
