import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { BUDGET_ACTIONS, type AdminApi, type AdminTenant, type QuotaReport } from '../../api/admin';
import { ApiError } from '../../api/errors';
import type { FieldError } from '../../api/types';
import {
  describeChanges,
  draftFromLimits,
  GUARANTEED,
  guaranteedKey,
  guaranteedTypes,
  placeFieldErrors,
  quotaDiff,
  SCALAR_FIELDS,
  type PlacedErrors,
  type QuotaDraft,
} from './quotaForm';

interface QuotaFormProps {
  api: AdminApi;
  tenant: AdminTenant;
  /** The form's element id (the Edit button's aria-controls). */
  id: string;
  onSaved: (report: QuotaReport) => void;
  onClose: () => void;
}

const NO_ERRORS: PlacedErrors = { byField: {}, general: [] };

function domId(formId: string, key: string): string {
  return `${formId}-${key.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}

/**
 * One tenant's limits as a form. Only the fields changed since it was opened (or last
 * saved) are sent; the server's field errors appear under the inputs they name.
 */
export function QuotaForm({ api, tenant, id, onSaved, onClose }: QuotaFormProps) {
  const deviceType = tenant.device_type;
  const [base, setBase] = useState(tenant.limits);
  const [draft, setDraft] = useState<QuotaDraft>(() => draftFromLimits(tenant.limits, deviceType));
  const [errors, setErrors] = useState<PlacedErrors>(NO_ERRORS);
  const [message, setMessage] = useState<{ kind: 'error' | 'info' | 'saved'; text: string; lines?: string[] } | null>(
    null,
  );
  const [saving, setSaving] = useState(false);
  const [focusToken, setFocusToken] = useState(0);
  const formRef = useRef<HTMLFormElement>(null);
  const mounted = useRef(true);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  // After a refused submit, take the keyboard to the first field in error.
  useEffect(() => {
    if (!focusToken) return;
    const form = formRef.current;
    const first = form?.querySelector<HTMLElement>('[aria-invalid="true"]') ?? form?.querySelector('.form-errors');
    (first as HTMLElement | null | undefined)?.focus();
  }, [focusToken]);

  const set = (key: string, value: string) => {
    setDraft((d) => ({ ...d, [key]: value }));
    setErrors((e) => {
      const group = key.startsWith(`${GUARANTEED}.`) ? GUARANTEED : null;
      if (!e.byField[key] && !(group && e.byField[group])) return e;
      const byField = { ...e.byField };
      delete byField[key];
      if (group) delete byField[group];
      return { ...e, byField };
    });
  };

  const fail = (text: string, placed: PlacedErrors) => {
    setErrors(placed);
    setMessage({ kind: 'error', text });
    setFocusToken((n) => n + 1);
  };

  const onSubmit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (saving) return;
    const diff = quotaDiff(base, draft);
    if (diff.errors.length) {
      fail('Fix the highlighted fields.', placeFieldErrors(diff.errors, Object.keys(draft)));
      return;
    }
    if (!Object.keys(diff.changes).length) {
      setErrors(NO_ERRORS);
      setMessage({ kind: 'info', text: 'Nothing to save: no limit was changed.' });
      return;
    }
    setSaving(true);
    setErrors(NO_ERRORS);
    setMessage(null);
    try {
      const report = await api.updateQuota(tenant.tenant, diff.changes);
      if (!mounted.current) return;
      const lines = describeChanges(base, diff.changes);
      setBase(report.limits);
      setDraft(draftFromLimits(report.limits, report.device_type));
      setMessage({ kind: 'saved', text: 'Saved.', lines });
      onSaved(report);
    } catch (e) {
      if (!mounted.current) return;
      const error = e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
      const placed = placeFieldErrors(error.details, Object.keys(draft));
      const text = !error.details.length
        ? `Could not save: ${error.message}`
        : placed.general.length
          ? 'The server refused the change:'
          : 'The server refused the change; see the highlighted fields.';
      fail(text, placed);
    } finally {
      if (mounted.current) setSaving(false);
    }
  };

  const onKeyDown = (event: KeyboardEvent<HTMLFormElement>) => {
    if (event.key === 'Escape' && !saving) {
      event.preventDefault();
      onClose();
    }
  };

  const errorFor = (key: string) => errors.byField[key];

  const describedBy = (key: string, hint?: boolean) =>
    [errorFor(key) ? `${domId(id, key)}-error` : '', hint ? `${domId(id, key)}-hint` : ''].filter(Boolean).join(' ') ||
    undefined;

  const fieldError = (key: string) => {
    const messages = errorFor(key);
    if (!messages) return null;
    return (
      <p id={`${domId(id, key)}-error`} className="field-error" data-testid="quota-field-error" data-field={key}>
        {messages.join(' ')}
      </p>
    );
  };

  const types = guaranteedTypes(base, deviceType).filter((t) => guaranteedKey(t) in draft);
  const known: readonly string[] = BUDGET_ACTIONS;
  const actions = known.includes(draft.budget_action ?? '') ? known : [...known, draft.budget_action ?? ''];
  const general: FieldError[] = errors.general;

  return (
    <form
      ref={formRef}
      id={id}
      className="quota-form"
      data-testid={`quota-form-${tenant.tenant}`}
      aria-label={`Quota of ${tenant.name}`}
      onSubmit={onSubmit}
      onKeyDown={onKeyDown}
      noValidate
    >
      {message && (
        <div
          className={message.kind === 'error' ? 'form-errors' : `notice quota-message quota-${message.kind}`}
          role={message.kind === 'error' ? 'alert' : 'status'}
          tabIndex={message.kind === 'error' ? -1 : undefined}
          data-testid="quota-form-message"
        >
          <p className={message.kind === 'error' ? 'form-errors-title' : 'quota-message-title'}>{message.text}</p>
          {(message.lines?.length || (message.kind === 'error' && general.length > 0)) && (
            <ul>
              {message.lines?.map((line) => <li key={line}>{line}</li>)}
              {message.kind === 'error' &&
                general.map((e, i) => (
                  <li key={i}>
                    {e.field && e.field !== '<body>' && <code className="field-path">{e.field}</code>} {e.message}
                  </li>
                ))}
            </ul>
          )}
        </div>
      )}

      <div className="quota-grid">
        <fieldset
          className={`quota-group${errorFor(GUARANTEED) ? ' quota-group-invalid' : ''}`}
          aria-describedby={errorFor(GUARANTEED) ? `${domId(id, GUARANTEED)}-error` : undefined}
        >
          <legend>Guaranteed GPUs</legend>
          {types.map((type) => {
            const key = guaranteedKey(type);
            return (
              <div className="quota-field" key={key}>
                <label htmlFor={domId(id, key)}>
                  {type}
                  {type === deviceType && <span className="muted"> (this cluster)</span>}
                </label>
                <input
                  id={domId(id, key)}
                  data-testid={`quota-input-${key}`}
                  type="number"
                  inputMode="numeric"
                  step={1}
                  value={draft[key] ?? ''}
                  onChange={(e) => set(key, e.target.value)}
                  aria-invalid={errorFor(key) ? true : undefined}
                  aria-describedby={describedBy(key)}
                />
                {fieldError(key)}
              </div>
            );
          })}
          {fieldError(GUARANTEED)}
        </fieldset>

        {SCALAR_FIELDS.map((field) => (
          <div className="quota-field" key={field.key}>
            <label htmlFor={domId(id, field.key)}>{field.label}</label>
            <input
              id={domId(id, field.key)}
              data-testid={`quota-input-${field.key}`}
              type="number"
              inputMode={field.kind === 'int' ? 'numeric' : 'decimal'}
              step={field.kind === 'int' ? 1 : 'any'}
              value={draft[field.key] ?? ''}
              onChange={(e) => set(field.key, e.target.value)}
              aria-invalid={errorFor(field.key) ? true : undefined}
              aria-describedby={describedBy(field.key, true)}
            />
            <span id={`${domId(id, field.key)}-hint`} className="quota-hint muted">
              {field.hint}
            </span>
            {fieldError(field.key)}
          </div>
        ))}

        <div className="quota-field">
          <label htmlFor={domId(id, 'budget_action')}>Over budget</label>
          <select
            id={domId(id, 'budget_action')}
            data-testid="quota-input-budget_action"
            value={draft.budget_action ?? ''}
            onChange={(e) => set('budget_action', e.target.value)}
            aria-invalid={errorFor('budget_action') ? true : undefined}
            aria-describedby={describedBy('budget_action', true)}
          >
            {actions.map((a) => (
              <option key={a} value={a}>
                {a === 'block' ? 'block new jobs' : a === 'pause' ? 'pause running jobs' : a}
              </option>
            ))}
          </select>
          <span id={`${domId(id, 'budget_action')}-hint`} className="quota-hint muted">
            when the GPU-hours are spent
          </span>
          {fieldError('budget_action')}
        </div>
      </div>

      <div className="quota-actions">
        <button type="button" className="btn btn-quiet" onClick={onClose} disabled={saving}>
          Close
        </button>
        <button type="submit" className="btn btn-primary" data-testid="quota-save" disabled={saving}>
          {saving ? 'Saving…' : 'Save changes'}
        </button>
      </div>
    </form>
  );
}
