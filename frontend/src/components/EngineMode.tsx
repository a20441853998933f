import type { EngineMode } from '../api/types';

/** What a simulated run is: it looks like a trained one otherwise (status, curves). */
export const SIMULATED_MEANING =
  'timings and throughput come from the cost model; no weights, samples or rewards were produced.';

const TITLES: Record<EngineMode, string> = {
  simulated: `Simulated: ${SIMULATED_MEANING}`,
  real: 'Real: a model was trained.',
};

/** The engine mode as a badge whose text is exactly the mode (`data-testid="engine-mode"`). */
export function EngineModeBadge({ mode }: { mode: EngineMode }) {
  return (
    <span className={`badge-mode badge-mode-${mode}`} data-testid="engine-mode" title={TITLES[mode]}>
      {mode}
    </span>
  );
}

/** The one line on what simulated means, once on a page that shows a simulated run (`subject`: who). */
export function SimulatedNote({ subject = 'Simulated run' }: { subject?: string }) {
  return (
    <p className="mode-note" data-testid="simulated-note">
      <strong>{subject}:</strong> {SIMULATED_MEANING}
    </p>
  );
}
