import { csrfToken } from './csrf';
import { ApiError, networkError, parseApiError } from './errors';
import type {
  Checkpoint,
  CloneJobInput,
  ClusterTimeline,
  Job,
  LogsPage,
  Me,
  MetricsResponse,
  Page,
  Preset,
  Sample,
} from './types';
import type { Dataset, DatasetDetail, DryRunInput, DryRunResult } from './types';
import type { JobAccuracy, JobEstimate } from './estimate';
import type { TrainableModel } from './models';
import type { InstalledReward } from './rewards';

const API = '/api/v1';

/** Where the server-rendered login page lives; `next` brings the user back here. */
export function loginUrl(next: string): string {
  return `/accounts/login/?next=${encodeURIComponent(next)}`;
}

/**
 * The path and query of a pagination link. DRF builds `next`/`previous` as absolute
 * URLs from the request's host and scheme, which behind a TLS-terminating proxy can
 * come back as http:// (blocked as mixed content); the page only needs the path.
 */
export function pathOf(url: string): string {
  const parsed = new URL(url, 'http://placeholder.invalid');
  return parsed.pathname + parsed.search;
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface ApiClientOptions {
  /** Slug sent as X-Tenant on every call; null only for /me, before a tenant is known. */
  tenant: string | null;
  /** Called once a response says the session is gone (before the promise rejects). */
  onUnauthenticated?: () => void;
}

export class ApiClient {
  private readonly tenant: string | null;
  private readonly onUnauthenticated: (() => void) | undefined;

  constructor(options: ApiClientOptions) {
    this.tenant = options.tenant;
    this.onUnauthenticated = options.onUnauthenticated;
  }

  me(signal?: AbortSignal): Promise<Me> {
    return this.request<Me>(`${API}/me`, { signal });
  }

  /** First page of jobs (optionally one status), or the page a `next`/`previous` link names. */
  listJobs(opts: { status?: string; pageUrl?: string | null }, signal?: AbortSignal): Promise<Page<Job>> {
    let path = `${API}/jobs`;
    if (opts.pageUrl) path = pathOf(opts.pageUrl);
    else if (opts.status) path += `?status=${encodeURIComponent(opts.status)}`;
    return this.request<Page<Job>>(path, { signal });
  }

  getJob(id: string, signal?: AbortSignal): Promise<Job> {
    return this.request<Job>(`${API}/jobs/${encodeURIComponent(id)}`, { signal });
  }

  createJob(body: { name: string; spec: unknown }, idempotencyKey: string): Promise<Job> {
    return this.request<Job>(`${API}/jobs`, {
      method: 'POST',
      body,
      headers: { 'Idempotency-Key': idempotencyKey },
    });
  }

  /** What submitting `body` now would take, cost and wait; nothing is created. */
  estimateJob(body: { name: string; spec: unknown }, signal?: AbortSignal): Promise<JobEstimate> {
    return this.request<JobEstimate>(`${API}/jobs/estimate`, { method: 'POST', body, signal });
  }

  /** An ended job's estimate beside its run (409 while it runs). */
  getJobAccuracy(id: string, signal?: AbortSignal): Promise<JobAccuracy> {
    return this.request<JobAccuracy>(`${API}/jobs/${encodeURIComponent(id)}/estimate`, { signal });
  }

  /** Delete an ended job with its checkpoints, samples and logs (409 until it has ended). */
  async deleteJob(id: string): Promise<void> {
    await this.request<undefined>(`${API}/jobs/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }

  cancelJob(id: string): Promise<Job> {
    return this.request<Job>(`${API}/jobs/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
  }

  getMetrics(id: string, signal?: AbortSignal): Promise<MetricsResponse> {
    return this.request<MetricsResponse>(`${API}/jobs/${encodeURIComponent(id)}/metrics`, {
      signal,
    });
  }

  async listPresets(signal?: AbortSignal): Promise<Preset[]> {
    const page = await this.request<{ results: Preset[] }>(`${API}/presets`, { signal });
    return page.results;
  }

  /** The rewards a spec's data.grader may name here: the built-in graders and the operator's. */
  async listRewards(signal?: AbortSignal): Promise<InstalledReward[]> {
    const page = await this.request<{ results: InstalledReward[] }>(`${API}/rewards`, { signal });
    return page.results;
  }

  /** What a spec may name as its model here: catalogue or tiny models, and checkpoints. */
  async listModels(signal?: AbortSignal): Promise<TrainableModel[]> {
    const page = await this.request<{ results: TrainableModel[] }>(`${API}/models`, { signal });
    return page.results;
  }

  protected async request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
    const method = opts.method ?? 'GET';
    const headers: Record<string, string> = { Accept: 'application/json', ...opts.headers };
    if (this.tenant) headers['X-Tenant'] = this.tenant;
    if (method !== 'GET') headers['X-CSRFToken'] = csrfToken();
    let body: string | FormData | undefined;
    if (opts.body instanceof FormData) {
      body = opts.body; // multipart: the browser writes the Content-Type with its boundary
    } else if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }

    let response: Response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body,
        credentials: 'same-origin',
        signal: opts.signal,
      });
    } catch (cause) {
      if (opts.signal?.aborted) throw cause; // the caller gave up; not an error to show
      throw networkError(cause);
    }

    const text = await response.text();
    if (!response.ok) {
      const error = parseApiError(response.status, text, response.statusText);
      if (error.isUnauthenticated) this.onUnauthenticated?.();
      throw error;
    }
    try {
      return (text ? JSON.parse(text) : undefined) as T;
    } catch {
      throw new ApiError(response.status, 'bad_response', `The server sent invalid JSON for ${path}`);
    }
  }

  // -- job page: actions, checkpoints, logs, samples, metric history -------------------

  pauseJob(id: string): Promise<Job> {
    return this.request<Job>(`${API}/jobs/${encodeURIComponent(id)}/pause`, { method: 'POST' });
  }

  resumeJob(id: string): Promise<Job> {
    return this.request<Job>(`${API}/jobs/${encodeURIComponent(id)}/resume`, { method: 'POST' });
  }

  /** A new job from this one's spec plus `overrides`, after a checkpoint; answers the new job. */
  cloneJob(id: string, body: CloneJobInput): Promise<Job> {
    return this.request<Job>(`${API}/jobs/${encodeURIComponent(id)}/clone`, { method: 'POST', body });
  }

  async listCheckpoints(id: string, signal?: AbortSignal): Promise<Checkpoint[]> {
    const page = await this.request<{ results: Checkpoint[] }>(
      `${API}/jobs/${encodeURIComponent(id)}/checkpoints`,
      { signal },
    );
    return page.results;
  }

  /** Log lines with a seq above `after` (oldest first, at most a server page of them). */
  getJobLogs(id: string, after: number, signal?: AbortSignal): Promise<LogsPage> {
    return this.request<LogsPage>(`${API}/jobs/${encodeURIComponent(id)}/logs?after=${after}`, { signal });
  }

  /** Sampled completions, newest step first; only `step`'s when given. */
  async listSamples(id: string, opts: { step?: number } = {}, signal?: AbortSignal): Promise<Sample[]> {
    const query = opts.step !== undefined ? `?step=${opts.step}` : '';
    const page = await this.request<{ results: Sample[] }>(
      `${API}/jobs/${encodeURIComponent(id)}/samples${query}`,
      { signal },
    );
    return page.results;
  }

  /** The metric history, each series downsampled on the server to at most `maxPoints`. */
  getMetricHistory(id: string, maxPoints: number, signal?: AbortSignal): Promise<MetricsResponse> {
    return this.request<MetricsResponse>(
      `${API}/jobs/${encodeURIComponent(id)}/metrics?max_points=${maxPoints}`,
      { signal },
    );
  }

  /**
   * A checkpoint's download as a plain link (the browser streams the model to disk; a fetch
   * would hold it in the page), naming the tenant in the query since a link sends no headers.
   */
  checkpointDownloadHref(downloadUrl: string): string {
    return this.tenant ? `${downloadUrl}?tenant=${encodeURIComponent(this.tenant)}` : downloadUrl;
  }

  /** Where every metric of a job is served as CSV (one row per step). */
  metricsCsvPath(id: string): string {
    return `${API}/jobs/${encodeURIComponent(id)}/metrics?format=csv`;
  }

  /**
   * The metrics CSV as a Blob, fetched with this client's tenant header (a plain link
   * would be answered for the user's default tenant only).
   */
  async downloadMetricsCsv(id: string, signal?: AbortSignal): Promise<Blob> {
    const headers: Record<string, string> = { Accept: 'text/csv' };
    if (this.tenant) headers['X-Tenant'] = this.tenant;
    const path = this.metricsCsvPath(id);
    let response: Response;
    try {
      response = await fetch(path, { headers, credentials: 'same-origin', signal });
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw networkError(cause);
    }
    if (!response.ok) {
      const error = parseApiError(response.status, await response.text(), response.statusText);
      if (error.isUnauthenticated) this.onUnauthenticated?.();
      throw error;
    }
    return response.blob();
  }

  // -- jobs list and compare -----------------------------------------------------------

  /** First page of jobs for a query built by the jobs list ("?status=a,b&name=x"), or a cursor link. */
  listJobsQuery(query: string, pageUrl: string | null, signal?: AbortSignal): Promise<Page<Job>> {
    const path = pageUrl ? pathOf(pageUrl) : `${API}/jobs${query}`;
    return this.request<Page<Job>>(path, { signal });
  }

  /** Only the named series of a job's metric history, each downsampled to at most `maxPoints`. */
  getNamedMetrics(
    id: string,
    names: readonly string[],
    maxPoints: number,
    signal?: AbortSignal,
  ): Promise<MetricsResponse> {
    const query = `max_points=${maxPoints}&names=${names.map(encodeURIComponent).join(',')}`;
    return this.request<MetricsResponse>(`${API}/jobs/${encodeURIComponent(id)}/metrics?${query}`, { signal });
  }

  // -- cluster page ----------------------------------------------------------------------

  /** The shared cluster's sub-stages over the last `windowS` seconds of the engine's clock. */
  clusterTimeline(windowS: number, signal?: AbortSignal): Promise<ClusterTimeline> {
    return this.request<ClusterTimeline>(`${API}/cluster/timeline?window_s=${windowS}`, { signal });
  }

  // -- datasets and grader dry runs ----------------------------------------------------

  async listDatasets(signal?: AbortSignal): Promise<Dataset[]> {
    const page = await this.request<{ results: Dataset[] }>(`${API}/datasets`, { signal });
    return page.results;
  }

  /** Upload a JSONL file's text; a 400 lists bad rows as `rows[<line>]` details. */
  uploadDataset(name: string, content: string): Promise<Dataset> {
    return this.request<Dataset>(`${API}/datasets`, { method: 'POST', body: { name, content } });
  }

  /** Upload a file as it is (multipart): a Parquet file in verl's layout, or JSONL. */
  uploadDatasetFile(name: string, file: Blob, fileName: string): Promise<Dataset> {
    const form = new FormData();
    form.append('name', name);
    form.append('file', file, fileName);
    return this.request<Dataset>(`${API}/datasets`, { method: 'POST', body: form });
  }

  getDataset(name: string, signal?: AbortSignal): Promise<DatasetDetail> {
    return this.request<DatasetDetail>(`${API}/datasets/${encodeURIComponent(name)}`, { signal });
  }

  deleteDataset(name: string): Promise<void> {
    return this.request<void>(`${API}/datasets/${encodeURIComponent(name)}`, { method: 'DELETE' });
  }

  async dryRunGrader(body: DryRunInput, signal?: AbortSignal): Promise<DryRunResult[]> {
    const page = await this.request<{ results: DryRunResult[] }>(`${API}/graders/dry-run`, {
      method: 'POST',
      body,
      signal,
    });
    return page.results;
  }
}

/** True for the rejection of a fetch that our own AbortController cancelled. */
export function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}
