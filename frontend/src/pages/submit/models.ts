import type { TrainableModel } from '../../api/models';

/** One key per model a spec can name: the catalogue name, or `path:<folder>` for a checkpoint. */
export function modelKey(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && 'path' in value) {
    const path = (value as { path: unknown }).path;
    return typeof path === 'string' ? `path:${path}` : null;
  }
  return null;
}

/** The spec text as an object; null while it is not a JSON object. */
export function parsedSpec(specText: string): Record<string, unknown> | null {
  try {
    const spec: unknown = JSON.parse(specText);
    return typeof spec === 'object' && spec !== null && !Array.isArray(spec) ? (spec as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The key of the model the spec text names, or null (no model, or the text is not JSON yet). */
export function specModelKey(specText: string): string | null {
  const spec = parsedSpec(specText);
  return spec ? modelKey(spec.model) : null;
}

/** The spec text with its model replaced, formatted; null when the text is not a JSON object. */
export function withModel(specText: string, model: TrainableModel): string | null {
  const spec = parsedSpec(specText);
  if (!spec) return null;
  return JSON.stringify({ ...spec, model: model.model }, null, 2);
}

/** A model size as models are named: `0.6B params`, `6.2M params`, `850K params`. */
export function formatParams(count: number): string {
  if (count >= 1e8) return `${(count / 1e9).toFixed(1)}B params`; // models go by 0.6B, not 600M
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M params`;
  return `${Math.round(count / 1e3)}K params`;
}
