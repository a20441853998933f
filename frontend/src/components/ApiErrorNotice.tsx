import type { ApiError } from '../api/errors';

interface ApiErrorNoticeProps {
  /** The first line, e.g. "Pause failed: ...". */
  title: string;
  error: ApiError;
  testId?: string;
  id?: string;
  /** Shows a "Dismiss" button that calls this. */
  onDismiss?: () => void;
}

/**
 * An API error shown where it happened: a title, then each of the error's
 * `{field, message}` details as "field: message".
 */
export function ApiErrorNotice({ title, error, testId, id, onDismiss }: ApiErrorNoticeProps) {
  return (
    <div className="notice notice-error api-error" role="alert" data-testid={testId} data-code={error.code} id={id}>
      <div className="api-error-head">
        <p className="api-error-title">{title}</p>
        {onDismiss && (
          <button type="button" className="btn btn-small btn-quiet" onClick={onDismiss} data-testid="dismiss-error">
            Dismiss
          </button>
        )}
      </div>
      {error.details.length > 0 && (
        <ul className="api-error-details">
          {error.details.map((d, i) => (
            <li key={`${d.field}:${i}`} data-testid="error-detail" data-field={d.field}>
              {d.field ? (
                <>
                  <code className="field-path">{d.field}</code>: {d.message}
                </>
              ) : (
                d.message
              )}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
