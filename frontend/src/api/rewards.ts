/** `GET /api/v1/rewards`: a reward a spec's `data.grader` may name here. */
export interface InstalledReward {
  name: string;
  description: string;
  /** The tasks and datasets it is meant for. */
  suits: string;
  /** Per reply; null: a built-in grader that runs in the environment's own process. */
  time_limit_s: number | null;
  /** Shipped with the service, else installed by the operator. */
  builtin: boolean;
  source: string;
}
