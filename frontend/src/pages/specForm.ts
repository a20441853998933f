import type { FieldError } from '../api/types';

export type ParsedForm =
  | { ok: true; name: string; spec: Record<string, unknown> }
  | { ok: false; errors: FieldError[] };

/**
 * Check the submit form before sending it: a name, and a spec that is a JSON object.
 * Errors use the API's field paths ("name", "spec") so they render like its 400s.
 */
export function parseSubmitForm(name: string, specText: string): ParsedForm {
  const errors: FieldError[] = [];
  const trimmed = name.trim();
  if (!trimmed) errors.push({ field: 'name', message: 'a job needs a name' });
  let spec: unknown;
  try {
    spec = JSON.parse(specText);
  } catch (e) {
    errors.push({ field: 'spec', message: `not valid JSON: ${e instanceof Error ? e.message : String(e)}` });
  }
  if (errors.length === 0 && (typeof spec !== 'object' || spec === null || Array.isArray(spec))) {
    errors.push({ field: 'spec', message: 'must be a JSON object ({...})' });
  }
  if (errors.length) return { ok: false, errors };
  return { ok: true, name: trimmed, spec: spec as Record<string, unknown> };
}

/** Which input an error belongs to, so that input can be highlighted. */
export function errorTarget(field: string): 'name' | 'spec' | null {
  if (field === 'name' || field.startsWith('name.')) return 'name';
  if (field === 'spec' || field.startsWith('spec.') || field.startsWith('spec[')) return 'spec';
  return null;
}
