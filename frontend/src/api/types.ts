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
  spec: Record<string, unknown>;
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
