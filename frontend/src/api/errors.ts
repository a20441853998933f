import type { FieldError } from './types';

/**
 * A failed API call. Every error response of the API has the shape
 * `{"error": {"code", "message", "details": [{"field", "message"}]}}`; anything else
 * (a proxy's HTML 502 page, a network failure) is mapped onto the same fields so the
 * UI has one thing to render.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: FieldError[];

  constructor(status: number, code: string, message: string, details: FieldError[] = []) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
  }

  /** The session is missing or expired: the user must log in again. */
  get isUnauthenticated(): boolean {
    return (
      this.status === 401 ||
      (this.status === 403 &&
        (this.code === 'not_authenticated' || this.code === 'authentication_failed'))
    );
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseDetails(raw: unknown): FieldError[] {
  if (!Array.isArray(raw)) return [];
  const out: FieldError[] = [];
  for (const item of raw) {
    if (!isRecord(item)) continue;
    const message = typeof item.message === 'string' ? item.message : '';
    const field = typeof item.field === 'string' ? item.field : '';
    if (message || field) out.push({ field, message: message || 'invalid value' });
  }
  return out;
}

function fallbackCode(status: number): string {
  if (status === 0) return 'network_error';
  if (status === 401) return 'not_authenticated';
  if (status === 403) return 'permission_denied';
  if (status === 404) return 'not_found';
  if (status >= 500) return 'server_error';
  return 'http_error';
}

/**
 * Turn a non-2xx response (its status code and raw body text) into an ApiError.
 * Pure, so it can be tested without a server.
 */
export function parseApiError(status: number, bodyText: string, statusText = ''): ApiError {
  let body: unknown;
  try {
    body = bodyText ? JSON.parse(bodyText) : undefined;
  } catch {
    body = undefined;
  }
  const error = isRecord(body) ? body.error : undefined;
  if (isRecord(error)) {
    const code = typeof error.code === 'string' && error.code ? error.code : fallbackCode(status);
    const message =
      typeof error.message === 'string' && error.message
        ? error.message
        : `Request failed (${status})`;
    return new ApiError(status, code, message, parseDetails(error.details));
  }
  const reason = statusText ? ` ${statusText}` : '';
  return new ApiError(status, fallbackCode(status), `Request failed: HTTP ${status}${reason}`);
}

/** The error to show when fetch() itself rejects (offline, DNS, CORS, aborted). */
export function networkError(cause: unknown): ApiError {
  const detail = cause instanceof Error && cause.message ? `: ${cause.message}` : '';
  return new ApiError(0, 'network_error', `Cannot reach the server${detail}`);
}
