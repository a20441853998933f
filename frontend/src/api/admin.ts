// The cluster administration API (/api/v1/admin/...): staff only, no tenant header.
import { ApiClient, pathOf } from './client';

const ADMIN = '/api/v1/admin';

export type BudgetAction = 'block' | 'pause';

export const BUDGET_ACTIONS: readonly BudgetAction[] = ['block', 'pause'];

/** A tenant's limits, as `GET /admin/tenants` reports them and the quota PATCH takes them. */
export interface QuotaLimits {
  /** GPUs always available to the tenant, by device type: `{"h100": 8}`. */
  guaranteed_gpus: Record<string, number>;
  borrow_limit_gpus: number;
  max_running_jobs: number;
  max_queued_jobs: number;
  max_gpus_per_job: number;
  monthly_gpu_hours: number;
  budget_action: BudgetAction | string;
  priority_limit: number;
  fair_share_weight: number;
}

export interface QuotaUsage {
  gpus_held: number;
  borrowed_gpus: number;
  running_jobs: number;
  queued_jobs: number;
  gpu_hours_this_month: number;
}

/** One tenant's limits beside its usage (the quota PATCH answers with this). */
export interface QuotaReport {
  tenant: string;
  device_type: string;
  cluster_gpus: number;
  limits: QuotaLimits;
  usage: QuotaUsage;
}

export interface AdminTenant extends QuotaReport {
  name: string;
}

/** Only the fields that change; `guaranteed_gpus` replaces the whole map. */
export type QuotaChanges = Partial<QuotaLimits>;

export interface QueueEntry {
  id: string;
  name: string;
  tenant: string;
  num_gpus: number;
  priority: number;
  admitted: boolean;
  /** `"<code>: <detail>"`, e.g. `"quota: 0 jobs running, the limit is 0"`; may be empty. */
  reason: string;
  created_at: string;
}

export interface ClusterSummary {
  device_type: string;
  num_gpus: number;
  gpus_held: number;
  by_tenant: Record<string, { gpus: number; borrowed_gpus: number }>;
  checked_at?: string;
  /** What the engine says about itself, or `{"error": "..."}` when it is unreachable. */
  engine: Record<string, unknown>;
}

export interface AuditEntry {
  id: number;
  created_at: string;
  tenant: string | null;
  actor: string | null;
  action: string;
  target: string;
  data: Record<string, unknown>;
}

export interface CursorPage<T> {
  next: string | null;
  previous: string | null;
  results: T[];
}

export class AdminApi extends ApiClient {
  constructor(onUnauthenticated?: () => void) {
    super({ tenant: null, onUnauthenticated });
  }

  async listTenants(signal?: AbortSignal): Promise<AdminTenant[]> {
    const page = await this.request<{ results: AdminTenant[] }>(`${ADMIN}/tenants`, { signal });
    return page.results;
  }

  updateQuota(slug: string, changes: QuotaChanges, signal?: AbortSignal): Promise<QuotaReport> {
    return this.request<QuotaReport>(`${ADMIN}/tenants/${encodeURIComponent(slug)}/quota`, {
      method: 'PATCH',
      body: changes,
      signal,
    });
  }

  async getQueue(signal?: AbortSignal): Promise<QueueEntry[]> {
    const page = await this.request<{ results: QueueEntry[] }>(`${ADMIN}/queue`, { signal });
    return page.results;
  }

  getCluster(signal?: AbortSignal): Promise<ClusterSummary> {
    return this.request<ClusterSummary>(`${ADMIN}/cluster`, { signal });
  }

  /** The newest audit entries (optionally one tenant's), or the page a `next` link names. */
  listAudit(
    opts: { tenant?: string; pageUrl?: string | null },
    signal?: AbortSignal,
  ): Promise<CursorPage<AuditEntry>> {
    let path = `${ADMIN}/audit`;
    if (opts.pageUrl) path = pathOf(opts.pageUrl);
    else if (opts.tenant) path += `?tenant=${encodeURIComponent(opts.tenant)}`;
    return this.request<CursorPage<AuditEntry>>(path, { signal });
  }
}
