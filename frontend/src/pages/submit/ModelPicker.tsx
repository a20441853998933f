import type { ApiClient } from '../../api/client';
import { useListing } from './useListing';
import type { TrainableModel } from '../../api/models';
import { formatParams, modelKey, specModelKey, withModel } from './models';

const KIND_LABEL: Record<string, string> = {
  catalogue: 'simulated',
  tiny: 'tiny, trained here',
  checkpoint: 'checkpoint',
};

/** The model field of the spec, picked from what this service can train (`GET /api/v1/models`). */
export function ModelPicker({
  api,
  spec,
  onSpecChange,
}: {
  api: ApiClient;
  spec: string;
  onSpecChange: (text: string) => void;
}) {
  const { items: models, error: loadError } = useListing<TrainableModel>((signal) => api.listModels(signal));

  if (loadError) return <p className="muted">Models unavailable: {loadError}. Name one in the spec.</p>;
  if (models === null) return <p className="muted">Loading models…</p>;
  const current = specModelKey(spec);
  const known = models.some((m) => modelKey(m.model) === current);
  return (
    <select
      id="job-model"
      data-testid="model-select"
      value={known && current !== null ? current : ''}
      onChange={(e) => {
        const chosen = models.find((m) => modelKey(m.model) === e.target.value);
        const text = chosen ? withModel(spec, chosen) : null;
        if (text !== null) onSpecChange(text);
      }}
    >
      {!known && <option value="">{current === null ? 'Fix the spec to pick a model' : `${current} (in the spec)`}</option>}
      {models.map((m) => (
        <option key={modelKey(m.model)} value={modelKey(m.model) ?? ''}>
          {m.name} ({KIND_LABEL[m.kind] ?? m.kind}, {formatParams(m.num_params)})
        </option>
      ))}
    </select>
  );
}
