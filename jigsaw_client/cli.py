"""``jigsaw jobs``: submit, watch and manage jobs on a JigsawRL server.

    jigsaw jobs submit spec.yaml --name gsm8k --watch
    jigsaw jobs submit spec.yaml --estimate
    jigsaw jobs list --status queued,running
    jigsaw jobs get JOB_ID
    jigsaw jobs logs JOB_ID -f
    jigsaw jobs cancel JOB_ID
    jigsaw jobs delete JOB_ID --yes
    jigsaw jobs download JOB_ID --step 20 --out ./model
    jigsaw jobs quota
    jigsaw jobs rewards

The server is ``--url`` or ``$JIGSAW_URL`` (default http://127.0.0.1:8000), the API token
``--token`` or ``$JIGSAW_TOKEN``. Exit status: 0 done (a watched job succeeded), 1 an error or
a watched job that failed or was cancelled, 2 a usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from jigsaw_client import render
from jigsaw_client.client import DEFAULT_URL, JigsawClient
from jigsaw_client.errors import ApiError, ClientError
from jigsaw_client.estimates import estimate_text
from jigsaw_client.follow import follow_events, follow_logs
from jigsaw_client.models import Job
from jigsaw_client.rewards import reward_table
from jigsaw_client.spec_file import SpecFileError, load_spec

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
MAX_PAGE_SIZE = 200  # the server's cap on page_size

Command = Callable[[JigsawClient, argparse.Namespace], int]


def _submit(client: JigsawClient, args: argparse.Namespace) -> int:
    if args.estimate:
        return _estimate(client, args)
    job = client.submit_job(load_spec(args.spec), name=args.name)
    if args.json and not args.watch:
        _print_json(job)
        return EXIT_OK
    print(f"submitted job {job['id']} ({job['name']}): {render.status_text(job)}", flush=True)
    return _watch_job(client, job) if args.watch else EXIT_OK


def _estimate(client: JigsawClient, args: argparse.Namespace) -> int:
    estimate = client.estimate_job(load_spec(args.spec), name=args.name)
    if args.json:
        _print_json(estimate)
    else:
        print(estimate_text(estimate))
    return EXIT_FAILED if estimate["blocked"] else EXIT_OK


def _watch(client: JigsawClient, args: argparse.Namespace) -> int:
    return _watch_job(client, client.get_job(args.job_id))


def _watch_job(client: JigsawClient, job: Job) -> int:
    view = render.ProgressView(job)
    try:
        for event in follow_events(client, job["id"]):
            if (line := view.update(event)) is not None:
                print(line, flush=True)
    except KeyboardInterrupt:
        print(f"\nstopped watching; the job goes on (jigsaw jobs watch {job['id']})", file=sys.stderr)
        return EXIT_INTERRUPTED
    reason = f": {view.reason}" if view.reason and view.status != "succeeded" else ""
    print(f"job {job['id']} {view.status}{reason}")
    return EXIT_OK if view.status == "succeeded" else EXIT_FAILED


def _list(client: JigsawClient, args: argparse.Namespace) -> int:
    statuses = [s.strip() for s in args.status.split(",") if s.strip()]
    page_size = min(args.limit, MAX_PAGE_SIZE) if args.limit else MAX_PAGE_SIZE
    jobs = list(islice(client.list_jobs(statuses=statuses, page_size=page_size), args.limit or None))
    if args.json:
        _print_json(jobs)
    else:
        print(render.job_table(jobs))
    return EXIT_OK


def _get(client: JigsawClient, args: argparse.Namespace) -> int:
    job = client.get_job(args.job_id)
    if args.json:
        _print_json(job)
    else:
        print(render.job_detail(job))
    return EXIT_OK


def _logs(client: JigsawClient, args: argparse.Namespace) -> int:
    try:
        for line in follow_logs(client, args.job_id, follow=args.follow):
            print(render.log_line(line), flush=True)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _cancel(client: JigsawClient, args: argparse.Namespace) -> int:
    job = client.cancel_job(args.job_id)
    reason = f" ({job['status_reason']})" if job["status_reason"] else ""
    print(f"job {job['id']}: {job['status']}{reason}")
    return EXIT_OK


def _delete(client: JigsawClient, args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            print("error: deleting a job cannot be undone; pass --yes to confirm", file=sys.stderr)
            return EXIT_USAGE
        answer = input(f"delete job {args.job_id} with its checkpoints, samples and logs? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not deleted")
            return EXIT_FAILED
    client.delete_job(args.job_id)
    print(f"job {args.job_id}: deleted (its usage stays in the ledger)")
    return EXIT_OK


def _download(client: JigsawClient, args: argparse.Namespace) -> int:
    step = client.latest_checkpoint_step(args.job_id) if args.step is None else args.step
    out = Path(args.out or f"{args.job_id}-step-{step}")
    meter = render.TransferMeter(f"step {step}", tty=sys.stderr.isatty())
    model = client.download_checkpoint(args.job_id, out, step=step, progress=meter.update)
    meter.finish()
    print(f"job {args.job_id} step {step}: {len(model.files)} files, {render.size_text(model.bytes)} in {model.path}")
    return EXIT_OK


def _quota(client: JigsawClient, args: argparse.Namespace) -> int:
    quota = client.quota()
    if args.json:
        _print_json(quota)
    else:
        print(render.quota_report(quota))
    return EXIT_OK


def _rewards(client: JigsawClient, args: argparse.Namespace) -> int:
    rewards = client.rewards()
    if args.json:
        _print_json(rewards)
    else:
        print(reward_table(rewards))
    return EXIT_OK


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _count(raw: str) -> int:
    if not raw.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {raw!r}")
    return int(raw)


def _job_id(raw: str) -> str:
    try:
        uuid.UUID(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id (a UUID): {raw!r}") from None
    return raw


def build_parser() -> argparse.ArgumentParser:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help=f"the server (default: $JIGSAW_URL or {DEFAULT_URL})")
    server.add_argument("--token", help="API token (default: $JIGSAW_TOKEN)")
    parser = argparse.ArgumentParser(prog="jigsaw jobs", description="Submit, watch and manage jobs on a server.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run: Command, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[server], help=help, description=help)
        p.set_defaults(run=run)
        return p

    p = command("submit", _submit, "submit a pipeline spec (a YAML or JSON file; - reads standard input)")
    p.add_argument("spec")
    p.add_argument("--name", default="", help="the job's name (default: the server's choice)")
    p.add_argument("--watch", action="store_true", help="show progress until the job ends; exit 1 unless it succeeds")
    p.add_argument("--json", action="store_true", help="print the created job as JSON (without --watch)")
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print what it would take, cost and wait, and submit nothing; exit 1 if a quota or budget would block it",
    )
    p = command("watch", _watch, "show a job's progress until it ends; exit 1 unless it succeeds")
    p.add_argument("job_id", type=_job_id)
    p = command("list", _list, "the tenant's jobs, newest first")
    p.add_argument("--status", default="", help="comma separated, e.g. queued,running")
    p.add_argument("--limit", type=_count, default=50, help="at most this many (0: all; default 50)")
    p.add_argument("--json", action="store_true")
    p = command("get", _get, "one job")
    p.add_argument("job_id", type=_job_id)
    p.add_argument("--json", action="store_true")
    p = command("logs", _logs, "a job's log lines")
    p.add_argument("job_id", type=_job_id)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    p = command("cancel", _cancel, "cancel a job")
    p.add_argument("job_id", type=_job_id)
    p = command("delete", _delete, "delete an ended job with its checkpoints, samples and logs")
    p.add_argument("job_id", type=_job_id)
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p = command("download", _download, "a real job's checkpoint as a Hugging Face directory (default: the latest)")
    p.add_argument("job_id", type=_job_id)
    p.add_argument("--step", type=_count, help="the checkpoint's step (default: the latest)")
    p.add_argument("--out", help="an absent or empty directory to write it into (default: ./JOB_ID-step-STEP)")
    p = command("quota", _quota, "the tenant's limits and what it uses of them")
    p.add_argument("--json", action="store_true")
    p = command("rewards", _rewards, "the rewards a spec's data.grader may name here, with what each suits")
    p.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    token = args.token or os.environ.get("JIGSAW_TOKEN") or None
    try:
        client = JigsawClient(args.url or os.environ.get("JIGSAW_URL") or DEFAULT_URL, token)
    except ValueError as exc:
        source = "--url" if args.url or not os.environ.get("JIGSAW_URL") else "JIGSAW_URL"
        print(f"error: {source}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with client:
        try:
            run: Command = args.run
            return run(client, args)
        except SpecFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ApiError as exc:
            print(_error_text(exc, has_token=token is not None), file=sys.stderr)
            return EXIT_FAILED
        except ClientError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED


def _error_text(exc: ApiError, *, has_token: bool) -> str:
    lines = [f"error: {exc.message} ({exc.code}, HTTP {exc.status})"]
    lines += [f"  {d['field']}: {d['message']}" for d in exc.details]
    if exc.status == 401 and not has_token:
        lines.append("  (no API token: pass --token or set JIGSAW_TOKEN)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
