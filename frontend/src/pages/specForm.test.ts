import { describe, expect, it } from 'vitest';
import { errorTarget, parseSubmitForm } from './specForm';

describe('parseSubmitForm', () => {
  it('accepts a name and a JSON object', () => {
    expect(parseSubmitForm('  run-1 ', '{"rollout": {"n": 4}}')).toEqual({
      ok: true,
      name: 'run-1',
      spec: { rollout: { n: 4 } },
    });
  });

  it('reports a missing name and broken JSON together', () => {
    const result = parseSubmitForm(' ', '{"rollout": ');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors.map((e) => e.field)).toEqual(['name', 'spec']);
    expect(result.errors[1]!.message).toMatch(/^not valid JSON/);
  });

  it.each(['[]', 'null', '3', '"x"'])('rejects a spec that is not an object: %s', (text) => {
    const result = parseSubmitForm('a', text);
    expect(result).toEqual({ ok: false, errors: [{ field: 'spec', message: 'must be a JSON object ({...})' }] });
  });
});

describe('errorTarget', () => {
  it.each([
    ['name', 'name'],
    ['spec', 'spec'],
    ['spec.rollout.n', 'spec'],
    ['spec[0]', 'spec'],
    ['specific', null],
    ['', null],
    ['non_field_errors', null],
  ])('%s -> %s', (field, target) => {
    expect(errorTarget(field)).toBe(target);
  });
});
