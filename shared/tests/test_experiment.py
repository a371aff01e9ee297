"""The experiment harness and reports."""

import json
import math

import numpy as np
import pytest

from icml25_core import (
    Experiment,
    Result,
    Row,
    Verdict,
    markdown_table,
    run_experiment,
    write_reports,
)


def _run(config, seed, out_dir):
    n = config["n"]
    return [
        Row("mine", seed, {"score": 1.0 + seed, "only_mine": 5.0}, {"n": n}),
        Row("peer", seed, {"score": 0.5 * seed}, {"n": n}, baseline=True),
    ]


def _judge(rows):
    mine = np.mean([r.metrics["score"] for r in rows if r.method == "mine"])
    peer = np.mean([r.metrics["score"] for r in rows if r.method == "peer"])
    return Verdict(bool(mine > peer + 0.5), f"mine {mine:.2f} vs peer {peer:.2f}")


PROFILES = {"smoke": {"n": 2}, "quick": {"n": 10}, "full": {"n": 100}}
EMPTY = {"smoke": {}, "quick": {}, "full": {}}
TOY = Experiment("toy", "mine beats peer by 0.5", _run, _judge, PROFILES, default_seeds=2)


def test_seeds_rows_and_verdict(tmp_path):
    result = run_experiment(TOY, method="toy-method", seeds=3, out_dir=tmp_path)
    assert result.seeds == [0, 1, 2]
    assert len(result.rows) == 6
    # mine mean = 2.0, peer mean = 0.5
    assert result.held
    assert result.verdict == Verdict(True, "mine 2.00 vs peer 0.50")
    assert result.environment["icml25-core"]


def test_default_and_explicit_seeds(tmp_path):
    assert run_experiment(TOY, method="m", out_dir=tmp_path).seeds == [0, 1]
    assert run_experiment(TOY, method="m", seeds=[7], out_dir=tmp_path).seeds == [7]


def test_claim_that_does_not_hold_is_a_result(tmp_path):
    result = run_experiment(TOY, method="m", seeds=[0], out_dir=tmp_path)  # mine 1.0 vs peer 0.0
    assert result.held
    strict = Experiment(
        "strict", "mine beats peer by 5", _run, lambda rows: Verdict(False, "no"), PROFILES
    )
    assert not run_experiment(strict, method="m", seeds=1, out_dir=tmp_path).held


def test_summary_mean_and_std(tmp_path):
    result = run_experiment(TOY, method="m", seeds=3, out_dir=tmp_path)
    summary = {s["method"]: s for s in result.summary()}
    mean, std = summary["mine"]["metrics"]["score"]
    assert mean == pytest.approx(2.0)
    assert std == pytest.approx(1.0)  # sample std of 1, 2, 3
    assert summary["peer"]["baseline"] is True
    assert "only_mine" not in summary["peer"]["metrics"]


def test_nan_metrics_are_ignored_in_summary(tmp_path):
    exp = Experiment(
        "nan",
        "c",
        lambda p, s, o: [Row("m", s, {"x": math.nan if s == 0 else 2.0})],
        lambda r: Verdict(True, ""),
        EMPTY,
    )
    result = run_experiment(exp, method="m", seeds=2, out_dir=tmp_path)
    assert result.summary()[0]["metrics"]["x"] == (2.0, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"profile": "huge"}, "profile must be one of"),
        ({"overrides": {"size": 3}}, r"overrides \['size'\] are not settings"),
        ({"seeds": 0}, "seeds must be a positive"),
        ({"seeds": []}, "seeds must not be empty"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_experiment(TOY, method="m", out_dir=tmp_path, **kwargs)


def test_reports_round_trip(tmp_path):
    result = run_experiment(TOY, method="toy-method", seeds=2, out_dir=tmp_path)
    paths = write_reports([result], tmp_path / "out")
    text = paths["markdown"].read_text()
    assert "## toy-method · toy" in text and "**Result: held.**" in text
    assert "| mine | 10 | 2 | 1.5 ± 0.7071 | 5 |" in markdown_table(result)
    data = json.loads(paths["json"].read_text())
    again = Result.from_dict(data[0])
    assert again.rows == result.rows and again.verdict == result.verdict


def test_report_links_figures_relative_to_the_report(tmp_path, monkeypatch):
    def plot(rows, out_dir):
        path = out_dir / "fig.png"
        path.write_bytes(b"png")
        return [path]

    exp = Experiment("plotted", "c", _run, _judge, PROFILES, plot=plot)
    monkeypatch.chdir(tmp_path)
    result = run_experiment(exp, method="m", seeds=1, out_dir="runs/x/m/plotted")
    text = write_reports([result], "runs/x")["markdown"].read_text()
    assert "![fig](m/plotted/fig.png)" in text


def test_mean_metric_filters_by_method_and_setting():
    from icml25_core import Row, mean_metric

    rows = [
        Row("a", 0, {"m": 1.0}, {"task": "x", "n": 1}),
        Row("a", 1, {"m": 3.0}, {"task": "x", "n": 1}),
        Row("a", 0, {"m": 10.0}, {"task": "y", "n": 1}),
        Row("b", 0, {"m": 7.0}, {"task": "x", "n": 1}),
    ]
    assert mean_metric(rows, "m", "a", task="x") == 2.0
    assert mean_metric(rows, "m", "a") == pytest.approx(14 / 3)
    assert mean_metric(rows, "m", "b", task="x", n=1) == 7.0
    assert math.isnan(mean_metric(rows, "m", "a", task="z"))


def test_profiles_are_data_and_the_run_gets_the_chosen_one(tmp_path):
    for profile, n in (("smoke", 2), ("quick", 10), ("full", 100)):
        result = run_experiment(TOY, profile=profile, seeds=1, out_dir=tmp_path)
        assert {r.setting["n"] for r in result.rows} == {n}
        assert result.profile == profile
    result = run_experiment(TOY, overrides={"n": 7}, seeds=1, out_dir=tmp_path)
    assert {r.setting["n"] for r in result.rows} == {7}
    assert TOY.profiles["quick"] == {"n": 10}, "an override does not change the experiment"


def test_an_experiment_must_define_every_profile():
    with pytest.raises(ValueError, match=r"missing \['smoke'\]"):
        Experiment("x", "c", _run, _judge, {"quick": {}, "full": {}})


def test_judge_must_return_a_verdict(tmp_path):
    exp = Experiment("x", "c", _run, lambda rows: True, PROFILES)
    with pytest.raises(TypeError, match="must return a Verdict"):
        run_experiment(exp, seeds=1, out_dir=tmp_path)


def test_method_comes_from_the_registration(tmp_path, monkeypatch):
    import sys
    import types

    from icml25_core import Method

    module = types.ModuleType("fake_pkg.experiments")
    module.TOY = TOY
    monkeypatch.setitem(sys.modules, "fake_pkg.experiments", module)
    fake = Method(
        "fake-pkg", "T", ("A",), "ICML 2025", "u", "s", {"toy": "fake_pkg.experiments:TOY"}
    )
    monkeypatch.setattr("icml25_core.method.discover_methods", lambda: {"fake-pkg": fake})
    assert run_experiment(TOY, seeds=1, out_dir=tmp_path).method == "fake-pkg"
    monkeypatch.setattr("icml25_core.method.discover_methods", lambda: {})
    assert run_experiment(TOY, seeds=1, out_dir=tmp_path).method == "unregistered"


class _Counting:
    """A run function that counts its calls and can fail on one seed (an interruption)."""

    def __init__(self, fail_on=None):
        self.calls, self.fail_on = [], fail_on

    def __call__(self, config, seed, out_dir):
        if seed == self.fail_on:
            raise KeyboardInterrupt
        self.calls.append(seed)
        return [Row("mine", seed, {"score": np.float64(seed) / 3, "n": config["n"]})]


def _counting(run):
    return Experiment("count", "c", run, lambda rows: Verdict(True, "ok"), PROFILES)


def test_an_interrupted_run_resumes_from_its_recorded_seeds(tmp_path):
    interrupted = _Counting(fail_on=2)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(_counting(interrupted), method="m", seeds=4, out_dir=tmp_path)
    assert interrupted.calls == [0, 1]
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == [
        "seed-0.json",
        "seed-1.json",
    ]  # atomic writes leave no temporary file behind
    rest = _Counting()
    result = run_experiment(_counting(rest), method="m", seeds=4, out_dir=tmp_path, resume=True)
    assert rest.calls == [2, 3] and result.resumed == [0, 1]
    # loaded rows equal freshly computed ones (NumPy values round-trip through JSON)
    fresh = run_experiment(_counting(_Counting()), method="m", seeds=4, out_dir=tmp_path / "b")
    assert result.rows == fresh.rows and fresh.resumed == []
    assert result.rows[1].metrics["score"] == 1 / 3


def test_without_resume_every_seed_runs_again(tmp_path):
    run_experiment(_counting(_Counting()), method="m", seeds=2, out_dir=tmp_path)
    again = _Counting()
    run_experiment(_counting(again), method="m", seeds=2, out_dir=tmp_path)
    assert again.calls == [0, 1]


def test_resume_refuses_records_of_another_run_and_corrupt_ones(tmp_path):
    run_experiment(_counting(_Counting()), method="m", seeds=2, out_dir=tmp_path)
    exp = _counting(_Counting())
    with pytest.raises(ValueError, match=r"seed-0.json was written by a different run.*config"):
        run_experiment(exp, method="m", seeds=2, out_dir=tmp_path, resume=True, overrides={"n": 3})
    with pytest.raises(ValueError, match=r"different run.*profile"):
        run_experiment(exp, method="m", profile="full", seeds=2, out_dir=tmp_path, resume=True)
    record = tmp_path / "seeds" / "seed-1.json"
    record.write_text(record.read_text()[:40])  # torn by hand: the atomic write never does this
    with pytest.raises(ValueError, match=r"seed-1.json is corrupt"):
        run_experiment(exp, method="m", seeds=2, out_dir=tmp_path, resume=True)
