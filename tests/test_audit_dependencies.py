"""The dependency audit's verdicts (scripts/audit_dependencies.py, `make audit`): a known
vulnerability fails unless audit-exceptions.toml excuses it with a reason and a date not yet
passed; an unanswered source passes with a warning unless strict."""

from __future__ import annotations

import datetime
from pathlib import Path

from tests.scripts import load_script

audit = load_script("audit_dependencies")
TODAY = datetime.date(2027, 1, 15)


def finding(vuln_id: str = "PYSEC-2027-1", package: str = "Django") -> object:
    return audit.Finding("python", package, "5.2.19", vuln_id, {"GHSA-aaaa-bbbb-cccc"}, "5.2.21")


def exceptions_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "audit-exceptions.toml"
    path.write_text(body)
    return path


def test_a_vulnerability_without_an_exception_fails_and_names_the_fix() -> None:
    report = audit.Report(findings=[finding()])
    failures = audit.judge(report, [], TODAY, strict=False)
    assert failures == ["python: Django 5.2.19: PYSEC-2027-1 (fixed in 5.2.21)"]


def test_an_exception_matches_by_any_alias_until_its_revisit_date(tmp_path: Path) -> None:
    path = exceptions_file(
        tmp_path,
        '[[exception]]\nid = "GHSA-aaaa-bbbb-cccc"\npackage = "django"\n'
        'reason = "only the GIS backend is affected"\nrevisit = 2027-02-01\n',
    )
    report = audit.Report(findings=[finding()])
    excepted = audit.load_exceptions(path, report)
    assert audit.judge(report, excepted, TODAY, strict=False) == []
    later = audit.judge(report, excepted, datetime.date(2027, 2, 2), strict=False)
    assert len(later) == 1 and "was to be revisited by 2027-02-01" in later[0]


def test_an_exception_for_another_package_does_not_excuse(tmp_path: Path) -> None:
    path = exceptions_file(
        tmp_path, '[[exception]]\nid = "PYSEC-2027-1"\npackage = "flask"\nreason = "x"\nrevisit = 2028-01-01\n'
    )
    report = audit.Report(findings=[finding()])
    assert len(audit.judge(report, audit.load_exceptions(path, report), TODAY, strict=False)) == 1


def test_an_exception_without_reason_or_date_is_an_error(tmp_path: Path) -> None:
    path = exceptions_file(tmp_path, '[[exception]]\nid = "PYSEC-2027-1"\npackage = "django"\nrevisit = "soon"\n')
    report = audit.Report(findings=[finding()])
    assert audit.load_exceptions(path, report) == []
    failures = audit.judge(report, [], TODAY, strict=False)
    assert any("needs id, package, reason and a revisit date" in f for f in failures)


def test_an_unanswered_source_passes_unless_strict() -> None:
    report = audit.Report(unavailable=["python: the package index answered for no pin"], unaudited={"python": ["x==1"]})
    assert audit.judge(report, [], TODAY, strict=False) == []
    assert len(audit.judge(report, [], TODAY, strict=True)) == 2


def test_the_project_record_counts_only_for_the_release_it_describes() -> None:
    record = {
        "info": {"version": "2.0"},
        "vulnerabilities": [
            {"id": "PYSEC-1", "aliases": ["CVE-1"], "fixed_in": ["2.1"], "withdrawn": None},
            {"id": "PYSEC-2", "aliases": [], "fixed_in": [], "withdrawn": "2026-01-01T00:00:00"},
        ],
    }
    assert audit.latest_release_findings("pkg", "1.9", record) is None
    (only,) = audit.latest_release_findings("pkg", "2.0", record)
    assert only.ids() == {"PYSEC-1", "CVE-1"} and only.fix == "2.1"


def test_lock_entries_need_an_integrity_hash_and_the_registry() -> None:
    report = audit.Report()
    lock = {
        "packages": {
            "": {"name": "dashboard"},
            "node_modules/ok": {"integrity": "sha512-abc"},
            "node_modules/from-git": {"resolved": "git+ssh://example/x.git", "integrity": "sha512-abc"},
            "node_modules/no-hash": {"resolved": "https://registry.npmjs.org/no-hash/-/no-hash-1.0.0.tgz"},
            "node_modules/linked": {"link": True},
        }
    }
    assert audit.check_lock_integrity(lock, report) == 3
    assert [e.split(":")[1].split()[0] for e in report.errors] == ["node_modules/from-git", "node_modules/no-hash"]


def test_the_committed_pins_are_all_read() -> None:
    pins = audit.python_pins(audit.ROOT / "constraints.txt", audit.ROOT / "pyproject.toml")
    assert pins["django"] == "5.2.19" and pins["torch"] == "2.13.0"
    assert "vllm" not in pins  # the GPU extra is audited with its own lock, not beside the CPU pins
