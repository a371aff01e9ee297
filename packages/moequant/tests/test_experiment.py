"""The moe-ptq experiment's code path end to end on a random tiny model (no training):
rows for every calibration set and method, a verdict naming them, the plots."""

import torch

from moequant import experiments
from moequant.lm import tiny_mixtral

from .conftest import ToyTokenizer


def test_experiment_runs_end_to_end_on_a_tiny_model(tmp_path, monkeypatch):
    model = tiny_mixtral(96, hidden=32, layers=2, experts=4)
    ids = torch.randint(2, 96, (4000,), generator=torch.Generator().manual_seed(0))

    def fake_cached_model(*args, **kwargs):
        return model, ToyTokenizer(), ids, ids[:1024]

    monkeypatch.setattr(experiments, "cached_model", fake_cached_model)
    cfg = experiments.MOE_PTQ.config("smoke", hidden=32, test_tokens=1024)
    rows = experiments.MOE_PTQ.run(cfg, 0, tmp_path)
    names = {r.method for r in rows}
    assert set(experiments.SETS) <= names and set(experiments.METHODS) <= names
    gaps = [r.metrics["gap"] for r in rows if r.setting.get("part") == "quantization"]
    assert len(gaps) == 1 + 2 * len(experiments.METHODS) and all(g == g for g in gaps)
    verdict = experiments.MOE_PTQ.judge(rows)
    assert "MoEQuant" in verdict.summary and "tau 0.1" in verdict.summary
    assert all(p.exists() for p in experiments.MOE_PTQ.plot(rows, tmp_path))
    assert (tmp_path / "balance_seed0.json").is_file()


def test_paper_regime_experiment_runs_end_to_end_on_a_tiny_model(tmp_path, monkeypatch):
    model = tiny_mixtral(96, hidden=32, layers=2, experts=4)
    ids = torch.randint(2, 96, (4000,), generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(
        experiments, "cached_model", lambda *a, **k: (model, ToyTokenizer(), ids, ids[:1024])
    )
    exp = experiments.MOE_PTQ_PAPER
    rows = exp.run(exp.config("smoke", hidden=32, test_tokens=1024), 0, tmp_path)
    names = {r.method for r in rows}
    assert set(experiments.PAPER_SETS) <= names and set(experiments.PAPER_METHODS) <= names
    gaps = [r.metrics["gap"] for r in rows if r.setting.get("part") == "quantization"]
    assert len(gaps) == 1 + 2 * len(experiments.PAPER_METHODS) and all(g == g for g in gaps)
    distinct = [r.metrics["distinct_4grams"] for r in rows if "distinct_4grams" in r.metrics]
    assert len(distinct) == len(experiments.PAPER_SETS) and all(0 < d <= 1 for d in distinct)
    verdict = exp.judge(rows)
    assert "candidate sigma" in verdict.summary and "GPTQ+AGQ" in verdict.summary
    assert all(p.exists() for p in exp.plot(rows, tmp_path))


def test_distinct_ngram_share_oracle():
    assert experiments._distinct(torch.tensor([[1, 2, 3, 4, 5]]), 2) == 1.0
    assert experiments._distinct(torch.tensor([[7, 7, 7, 7, 7]]), 2) == 0.25
