// Pure helpers for the job page's usage and status lines.

/**
 * GPU time so far, from the job's billed GPU-seconds, in GPU-hours: "0 GPU-h",
 * "<0.01 GPU-h", "0.42 GPU-h", "12.5 GPU-h", "1,234 GPU-h".
 */
export function formatGpuHours(gpuSeconds: number): string {
  if (!Number.isFinite(gpuSeconds) || gpuSeconds <= 0) return '0 GPU-h';
  const hours = gpuSeconds / 3600;
  if (hours < 0.01) return '<0.01 GPU-h';
  if (hours < 10) return `${hours.toFixed(2)} GPU-h`;
  if (hours < 100) return `${hours.toFixed(1)} GPU-h`;
  return `${Math.round(hours).toLocaleString('en-US')} GPU-h`;
}

/** "4 × H100", "1 × A10G", or "2 GPUs" when the job takes any device type. */
export function formatDevices(numGpus: number, deviceType: string): string {
  if (deviceType) return `${numGpus} × ${deviceType.toUpperCase()}`;
  return numGpus === 1 ? '1 GPU' : `${numGpus} GPUs`;
}

/** Why a job waits (admission's codes) or was paused by the system. */
export type ReasonKind = 'capacity' | 'quota' | 'priority' | 'fair_share' | 'budget' | 'reclaimed';

const REASON_HELP: Record<ReasonKind, string> = {
  capacity: 'Not enough free GPUs on the cluster right now.',
  quota: "Your tenant is at its running-job or GPU limit (guarantee plus borrow limit).",
  priority: 'It would fit, but a higher-priority job is waiting for capacity first.',
  fair_share: 'It would fit, but a tenant with a smaller share of the cluster goes first.',
  budget: "Your tenant has spent this month's GPU-hours.",
  reclaimed: 'It ran on borrowed GPUs that their guaranteed owner needed back; it requeues by itself.',
};

export interface StatusReason {
  /** The reason's code, when it starts with a known one ("capacity: ..."); else null. */
  kind: ReasonKind | null;
  /** The text after the code (or the whole reason when there is no known code). */
  detail: string;
  /** One sentence on what the code means; "" when unknown. */
  help: string;
}

/** Split "capacity: needs 4 GPUs, 2 free of 8" into its code and its detail. */
export function parseStatusReason(reason: string): StatusReason {
  const match = /^([a-z_]+):\s*(.*)$/s.exec(reason.trim());
  if (match && match[1]! in REASON_HELP) {
    const kind = match[1] as ReasonKind;
    return { kind, detail: match[2]!, help: REASON_HELP[kind] };
  }
  return { kind: null, detail: reason.trim(), help: '' };
}
