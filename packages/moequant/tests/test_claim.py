"""The quick claim test: what the quick profile measured on seed 0, with stated margins.

The quick profile (a hidden-64 Mixtral trained by the package on the standard library with
one thread, cached after its first training) measured on seed 0, on the machine the README
table comes from: 3-bit perplexity gaps MoEQuant +1.125, GPTQ (random text) +0.394, RTN
+0.619; 4-bit MoEQuant +0.057, GPTQ +0.130, RTN +0.050; expert-frequency std of the
calibration sets: EBSS (tau 1.2) 0.131, random text 0.111. On an AMD EPYC machine the same
one-thread training gives another model (top-2 routing turns last-bit differences between
CPU kernels into different routing, so the trained weights differ): 3-bit MoEQuant +0.855,
GPTQ +0.320, RTN +0.730; 4-bit MoEQuant +0.201, GPTQ +0.020, RTN +0.216; EBSS 0.133,
random text 0.111. The test asserts what held on both models: GPTQ beats round-to-nearest
at 3 bits, every method loses less at 4 bits than at 3, and neither of the paper's claims
held. Which of RTN and GPTQ is better at 4 bits depends on the model (RTN on the first,
GPTQ on the second), so it is not asserted. Slower than the package budget (about 100 s on
two cores, plus about 2 minutes the first time, when the model is trained and cached): the
quick profile quantizes the model 14 times and measures perplexity on 100k tokens 15
times, and a smaller model does not reproduce these measurements.
"""

import pytest

from icml25_core import mean_metric, run_experiment
from moequant.experiments import (
    GPTQ,
    MOE_PTQ,
    MOE_PTQ_PAPER,
    MOEQUANT,
    PAPER_GPTQ,
    PAPER_MOEQUANT,
    RTN,
)


@pytest.mark.claim
def test_moe_ptq_quick(tmp_path):
    result = run_experiment(MOE_PTQ, profile="quick", seeds=[0], out_dir=tmp_path)
    rows = result.rows

    def gap(method, bits):
        return mean_metric(rows, "gap", method, part="quantization", bits=bits)

    # at 3 bits GPTQ's gap to full precision is at most 3/4 of round-to-nearest's ...
    assert gap(GPTQ, 3) <= 0.75 * gap(RTN, 3), (gap(GPTQ, 3), gap(RTN, 3))
    # ... and every method loses less at 4 bits than at 3 (by at least half: measured
    # ratios 0.05-0.33 over both models)
    for method in (RTN, GPTQ, MOEQUANT):
        assert gap(method, 4) <= 0.5 * gap(method, 3), (method, gap(method, 4), gap(method, 3))
    # the paper's perplexity claim did not hold: at 3 bits MoEQuant's gap is not below GPTQ's
    assert gap(MOEQUANT, 3) >= gap(GPTQ, 3), (gap(MOEQUANT, 3), gap(GPTQ, 3))
    # ... nor its balance claim: EBSS at tau 1.2 is not more balanced than random text
    ebss = mean_metric(rows, "mean_std", "EBSS", part="calibration")
    text = mean_metric(rows, "mean_std", "random text", part="calibration")
    assert ebss >= text, (ebss, text)
    assert not result.held


@pytest.mark.claim
def test_moe_ptq_paper_regime_quick(tmp_path):
    """The paper's regime (symmetric per-channel, MSE clip) on the quick model, seed 0.

    Measured here (Intel Xeon, full precision 56.32): expert-frequency std random text
    0.105, EBSS candidate sigma 0.130, parent sigma 0.135, candidate sigma on counts 0.086;
    distinct 4-grams text 0.84, EBSS candidate 0.075, counts 0.36; 3-bit gaps RTN +0.539,
    GPTQ (text) +0.475, MoEQuant (EBSS candidate + AGQ) +0.730; 4-bit +0.274, +0.153,
    +0.244. Asserted with margins: what a frequency balance term at tau 1.2 cannot do on a
    small model (the set stays repetitive, no more balanced than text), what the count
    balance does, and that the paper's perplexity claim did not hold at 3 bits.
    """
    result = run_experiment(MOE_PTQ_PAPER, profile="quick", seeds=[0], out_dir=tmp_path)
    rows = result.rows

    def cal(metric, name):
        return mean_metric(rows, metric, name, part="calibration")

    def gap(method, bits):
        return mean_metric(rows, "gap", method, part="quantization", bits=bits)

    cand, counts = "EBSS (candidate sigma)", "EBSS (candidate sigma, counts)"
    # frequencies at tau 1.2: the beams still fall into repetition, no more even than text
    assert cal("distinct_4grams", cand) <= 0.25 <= 0.7 <= cal("distinct_4grams", "random text")
    assert cal("mean_std", cand) >= cal("mean_std", "random text")
    # counts: the balance term grows with the length and wins (0.086 vs 0.105 / 0.130)
    # random text - counts: 0.0188 on seed 0 (Xeon and AVX2 path alike), 0.0126 on seed
    # 100 (issue 77); mean - 2 sd is 0.007, under the 0.01 set from seed 0
    assert cal("mean_std", counts) <= cal("mean_std", "random text") - 0.005
    assert cal("mean_std", counts) <= cal("mean_std", cand) - 0.02
    # 3-bit: MoEQuant's gap is not below GPTQ's on random text (0.730 vs 0.475)
    assert gap(PAPER_MOEQUANT, 3) >= gap(PAPER_GPTQ, 3)
    for method in (RTN, PAPER_GPTQ, PAPER_MOEQUANT):  # measured 4/3-bit ratios 0.32-0.51
        assert gap(method, 4) <= 0.75 * gap(method, 3), (method, gap(method, 4), gap(method, 3))
    assert not result.held
