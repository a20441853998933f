// Live progress: a job's step only grows, so the page can take it from metrics events as
// they stream in, and a GET that was in flight meanwhile must not move it back.

import type { JobEvent, JobProgress } from '../../api/types';

/** The progress after a batch of events: the highest metrics step seen. Same object if unchanged. */
export function progressFromEvents(progress: JobProgress, events: readonly JobEvent[]): JobProgress {
  let step = progress.step;
  for (const e of events) if (e.kind === 'metrics' && e.data.step > step) step = e.data.step;
  return step === progress.step ? progress : { ...progress, step };
}

/** A fetched job's progress merged with what the page shows: the step never goes back. */
export function keepLatestProgress(shown: JobProgress, fetched: JobProgress): JobProgress {
  return fetched.step >= shown.step ? fetched : { ...fetched, step: shown.step };
}
