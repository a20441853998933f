import { describe, expect, it } from 'vitest';
import { ApiError, networkError, parseApiError } from './errors';

describe('parseApiError', () => {
  it('reads the API error shape with field details', () => {
    const body = JSON.stringify({
      error: {
        code: 'validation_error',
        message: 'The spec is invalid.',
        details: [
          { field: 'spec.rollout.n', message: 'must be >= 1, got 0' },
          { field: 'name', message: 'required' },
        ],
      },
    });
    const error = parseApiError(400, body);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(400);
    expect(error.code).toBe('validation_error');
    expect(error.message).toBe('The spec is invalid.');
    expect(error.details).toEqual([
      { field: 'spec.rollout.n', message: 'must be >= 1, got 0' },
      { field: 'name', message: 'required' },
    ]);
  });

  it('tolerates missing or malformed details', () => {
    const error = parseApiError(
      409,
      JSON.stringify({ error: { code: 'conflict', message: 'already finished', details: [null, 'x', { field: 'a' }] } }),
    );
    expect(error.details).toEqual([{ field: 'a', message: 'invalid value' }]);
    expect(parseApiError(400, JSON.stringify({ error: { code: 'bad' } })).details).toEqual([]);
  });

  it.each([
    ['an HTML error page', 502, '<html>Bad Gateway</html>', 'server_error'],
    ['an empty body', 500, '', 'server_error'],
    ['JSON without "error"', 404, JSON.stringify({ detail: 'Not found.' }), 'not_found'],
    ['a bare 403', 403, '', 'permission_denied'],
  ])('falls back to a generic error for %s', (_label, status, body, code) => {
    const error = parseApiError(status, body, 'Status Text');
    expect(error.code).toBe(code);
    expect(error.message).toBe(`Request failed: HTTP ${status} Status Text`);
    expect(error.details).toEqual([]);
  });

  it('knows when the session is gone', () => {
    expect(parseApiError(401, '').isUnauthenticated).toBe(true);
    expect(
      parseApiError(403, JSON.stringify({ error: { code: 'not_authenticated', message: 'Log in.' } })).isUnauthenticated,
    ).toBe(true);
    expect(
      parseApiError(403, JSON.stringify({ error: { code: 'permission_denied', message: 'Viewer.' } })).isUnauthenticated,
    ).toBe(false);
  });
});

describe('networkError', () => {
  it('explains a failed fetch', () => {
    const error = networkError(new TypeError('Failed to fetch'));
    expect(error.status).toBe(0);
    expect(error.code).toBe('network_error');
    expect(error.message).toBe('Cannot reach the server: Failed to fetch');
  });
});
