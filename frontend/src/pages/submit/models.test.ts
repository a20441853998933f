import { describe, expect, it } from 'vitest';
import type { TrainableModel } from '../../api/models';
import { formatParams, modelKey, specModelKey, withModel } from './models';

const checkpoint = { name: 'mine', kind: 'checkpoint', model: { path: '/models/mine' } } as TrainableModel;

describe('model keys', () => {
  it('names catalogue models and checkpoints apart', () => {
    expect(modelKey('qwen3-0.6b')).toBe('qwen3-0.6b');
    expect(modelKey({ path: '/models/mine' })).toBe('path:/models/mine');
    expect(modelKey(undefined)).toBeNull();
    expect(specModelKey('{"model": {"path": "/models/mine"}}')).toBe('path:/models/mine');
    expect(specModelKey('{"model": ')).toBeNull();
  });
});

describe('withModel', () => {
  it('replaces only the model, keeping the rest of the spec', () => {
    const text = withModel('{"model": "qwen3-0.6b", "trainer": {"total_steps": 3}}', checkpoint);
    expect(JSON.parse(text!)).toEqual({ model: { path: '/models/mine' }, trainer: { total_steps: 3 } });
    expect(withModel('not json', checkpoint)).toBeNull();
  });
});

describe('formatParams', () => {
  it('reads as a size', () => {
    expect(formatParams(0.6e9)).toBe('0.6B params');
    expect(formatParams(6.2e6)).toBe('6.2M params');
    expect(formatParams(850_000)).toBe('850K params');
  });
});
