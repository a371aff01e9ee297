"""The icml25 command line, on a fake installed method."""

import pytest
from typer.testing import CliRunner

from icml25_core import Experiment, Method, Row, Verdict, cli

runner = CliRunner()
P = {"smoke": {}, "quick": {}, "full": {}}


def _fails(profile, seed, out_dir):
    raise RuntimeError("boom")


HOLDS = Experiment(
    "holds",
    "c",
    lambda p, s, o: [Row("m", s, {"x": 1.0})],
    lambda r: Verdict(True, "fine"),
    P,
    default_seeds=1,
)
DOES_NOT_HOLD = Experiment(
    "nope",
    "c",
    lambda p, s, o: [Row("m", s, {"x": 1.0})],
    lambda r: Verdict(False, "not at this scale"),
    P,
    default_seeds=1,
)
CRASHES = Experiment("crash", "c", _fails, lambda r: Verdict(True, ""), P, default_seeds=1)


@pytest.fixture
def fake(monkeypatch):
    m = Method(
        "fake-method",
        "T",
        ("A",),
        "ICML 2025",
        "https://example.org",
        "s",
        {"holds": "x:y", "nope": "x:z"},
    )
    bad = Method("crashy", "T", ("A",), "ICML 2025", "https://example.org", "s", {"crash": "x:w"})
    experiments = {
        ("fake-method", "holds"): HOLDS,
        ("fake-method", "nope"): DOES_NOT_HOLD,
        ("crashy", "crash"): CRASHES,
    }
    monkeypatch.setattr(
        Method, "load_experiment", lambda self, name: experiments[(self.name, name)]
    )
    monkeypatch.setattr(Method, "version", property(lambda self: "0.0.1"))
    monkeypatch.setattr(cli, "discover_methods", lambda: {"fake-method": m, "crashy": bad})
    monkeypatch.setattr(
        "icml25_core.method.discover_methods", lambda: {"fake-method": m, "crashy": bad}
    )
    return m


def test_list_and_info(fake):
    assert "fake-method" in runner.invoke(cli.app, ["list"]).output
    out = runner.invoke(cli.app, ["info", "fake-method"]).output
    assert "experiments: holds, nope" in out


def test_unknown_method_exits_2(fake):
    result = runner.invoke(cli.app, ["reproduce", "nope-method"])
    assert result.exit_code == 2
    assert "no installed method called 'nope-method'" in result.output


def test_claim_not_holding_is_exit_0(fake, tmp_path):
    result = runner.invoke(cli.app, ["reproduce", "fake-method", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "DID NOT HOLD" in result.output and "HELD" in result.output
    assert (tmp_path / "report.md").exists() and (tmp_path / "results.json").exists()


def test_crash_is_exit_1_and_others_still_run(fake, tmp_path):
    result = runner.invoke(cli.app, ["reproduce", "--all", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "crashy:crash crashed" in result.output
    assert "report.md" in result.output  # the other method's results were still written


def test_bad_options(fake):
    assert runner.invoke(cli.app, ["reproduce", "fake-method", "--profile", "huge"]).exit_code == 2
    assert runner.invoke(cli.app, ["reproduce"]).exit_code == 2
    assert (
        runner.invoke(cli.app, ["reproduce", "fake-method", "--experiment", "missing"]).exit_code
        == 2
    )


def test_bench_without_benchmarks_folder_says_where_they_are(fake, monkeypatch):
    monkeypatch.setattr(Method, "benchmarks_dir", lambda self: None)
    result = runner.invoke(cli.app, ["bench", "fake-method", "--smoke"])
    assert result.exit_code == 2
    assert "ship with its source tree" in result.output


def test_bench_runs_a_benchmark_file(fake, monkeypatch, tmp_path):
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    (bench_dir / "bench_toy.py").write_text(
        "from icml25_core import compare, make_report\n"
        "def run(smoke=False):\n"
        "    c = compare({'a': lambda: None, 'b': lambda: None}, reference='a', repeats=1, memory=False)\n"
        "    return make_report('toy', [c])\n"
    )
    monkeypatch.setattr(Method, "benchmarks_dir", lambda self: bench_dir)
    result = runner.invoke(
        cli.app, ["bench", "fake-method", "--smoke", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "fake-method" / "bench_toy-smoke.json").exists()


def test_out_folder_is_never_overwritten_silently(fake, tmp_path):
    out = tmp_path / "run"
    args = ["reproduce", "fake-method", "--experiment", "holds", "--out", str(out)]
    assert runner.invoke(cli.app, args).exit_code == 0
    (out / "stale.txt").write_text("from an earlier run")
    again = runner.invoke(cli.app, args)
    assert again.exit_code == 2 and "is not empty: pass --overwrite" in again.output
    assert (out / "stale.txt").exists()
    # an earlier run of ours is replaced whole: no stale part stays
    assert runner.invoke(cli.app, [*args, "--overwrite"]).exit_code == 0
    assert not (out / "stale.txt").exists() and (out / "report.md").exists()
    # a folder icml25 did not write: refused, and with --overwrite written into, not wiped
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    args = ["reproduce", "fake-method", "--experiment", "holds", "--out", str(foreign)]
    assert runner.invoke(cli.app, args).exit_code == 2
    assert runner.invoke(cli.app, [*args, "--overwrite"]).exit_code == 0
    assert (foreign / "thesis.tex").read_text() == "keep me"
    assert runner.invoke(cli.app, [*args, "--overwrite"]).exit_code == 0  # still not ours
    assert (foreign / "thesis.tex").read_text() == "keep me"
    afile = tmp_path / "a-file"
    afile.write_text("x")
    args = ["reproduce", "fake-method", "--out", str(afile)]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2 and "is a file" in result.output


def test_default_run_folders_are_unique(fake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["reproduce", "fake-method", "--experiment", "holds"]
    for _ in range(3):
        assert runner.invoke(cli.app, args).exit_code == 0
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 3 and all((r / "report.md").exists() for r in runs)


def test_resume_continues_our_run_folder_only(fake, tmp_path):
    out = tmp_path / "run"
    args = ["reproduce", "fake-method", "--experiment", "holds", "--out", str(out)]
    assert runner.invoke(cli.app, args).exit_code == 0
    assert (out / "fake-method" / "holds" / "seeds" / "seed-0.json").exists()
    result = runner.invoke(cli.app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    assert "1 loaded from an earlier run" in (out / "report.md").read_text()
    assert runner.invoke(cli.app, [*args, "--resume", "--overwrite"]).exit_code == 2
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    args = ["reproduce", "fake-method", "--experiment", "holds", "--out", str(foreign)]
    refused = runner.invoke(cli.app, [*args, "--resume"])
    assert refused.exit_code == 2 and "not an icml25 run folder" in refused.output
    assert runner.invoke(cli.app, ["reproduce", "fake-method", "--resume"]).exit_code == 2
