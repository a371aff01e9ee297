"""Write the official TabICL v1 classifier's probabilities that ``test_official.py`` checks.

Runs the OFFICIAL package, ``tabicl`` 0.1.4 (the paper's v1 code), which cannot be
installed beside the workspace's ``tabicl`` 2.x; install it into a folder of its own and
put that folder first on the path::

    uv pip install --no-deps --target /tmp/tabicl014 tabicl==0.1.4 einops
    PYTHONPATH=/tmp/tabicl014 uv run --locked python \
        packages/tabicl-lite/tests/official/make_v1_reference.py

It builds a small v1 network with random non-zero weights (seed 0), saves its config and
weights (official tensor names) next to this script, and records the official
``TabICLClassifier`` probabilities (AMP off, CPU) on wine, breast_cancer, a 25-class table
and a DataFrame with string / bool / category / nullable Int64 columns
(:func:`make_frame`, which the test rebuilds).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file
from sklearn.datasets import load_breast_cancer, load_wine

HERE = Path(__file__).parent
#: 2.x's option keys at the paper's v1 values (0.1.4 has none of them) and at the released
#: v2 classifier's (``scripts/train_v2_clf_stage*.sh``); ``test_official.py`` and the
#: benchmark build official networks with them
OPTIONS = {
    1: dict(
        col_affine=True,
        col_feature_group=False,
        col_target_aware=False,
        col_ssmax="none",
        icl_ssmax="none",
        row_rope_interleaved=True,
    ),
    2: dict(
        col_affine=False,
        col_feature_group="same",
        col_feature_group_size=3,
        col_target_aware=True,
        col_ssmax="qassmax-mlp-elementwise",
        icl_ssmax="qassmax-mlp-elementwise",
        row_rope_interleaved=False,
    ),
}
#: the lite network's sizes (the other arguments at the official defaults)
LITE = dict(
    embed_dim=32,
    col_num_blocks=2,
    col_nhead=2,
    col_num_inds=32,
    row_num_blocks=2,
    row_nhead=4,
    icl_num_blocks=4,
    icl_nhead=4,
)
#: the stored v1 reference network's sizes
CONFIG = dict(
    max_classes=10,
    embed_dim=16,
    col_num_blocks=1,
    col_nhead=2,
    col_num_inds=8,
    row_num_blocks=1,
    row_nhead=2,
    row_num_cls=2,
    icl_num_blocks=2,
    icl_nhead=2,
)


def randomize(model: torch.nn.Module, seed: int | None = 0) -> None:
    """Random non-zero weights from ``seed`` (``None``: the global generator as it stands),
    as the official initialises output projections at zero; LayerNorms near 1 / 0, RoPE
    frequencies left as they are (fixed, not learned)."""
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "rope" in name:
                continue
            if p.ndim == 1 and ("norm" in name or "ln" in name):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)


def random_network():
    from tabicl.model.tabicl import TabICL

    torch.manual_seed(0)
    model = TabICL(**CONFIG)
    randomize(model, seed=None)  # the generator after the constructor's draws
    return model.eval()


def make_frame(n: int = 240, seed: int = 1) -> tuple[pd.DataFrame, np.ndarray]:
    """A mixed-type table: float, strings with None, bool, category, Int64 with pd.NA (the
    official 0.1.4 fails on a ``string`` dtype column with pd.NA: sklearn's encoder gets
    NAType next to str)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    df = pd.DataFrame(
        {
            "x": rng.normal(size=n) + y,
            "colour": rng.choice(np.array(["red", "green", "blue", None], dtype=object), n),
            "flag": rng.random(n) < 0.3 + 0.2 * y,
            "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
            "count": pd.array(
                np.where(rng.random(n) < 0.1, None, rng.integers(0, 9, n) + y), dtype="Int64"
            ),
            "z": np.where(rng.random(n) < 0.05, np.nan, rng.lognormal(size=n)),
        }
    )
    return df, y


def main() -> None:
    from tabicl import TabICLClassifier
    from tabicl.__about__ import __version__

    assert __version__ == "0.1.4", f"needs tabicl 0.1.4, got {__version__}"

    model = random_network()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, HERE / "v1_tiny.safetensors")
    (HERE / "v1_tiny.json").write_text(json.dumps(CONFIG, indent=1) + "\n")
    ckpt = HERE / "v1_tiny.ckpt"
    torch.save({"config": CONFIG, "state_dict": state}, ckpt)

    rng = np.random.default_rng(0)
    cases = {}
    X, y = load_wine(return_X_y=True)
    cases["wine"] = (X, y, {})
    X, y = load_breast_cancer(return_X_y=True)
    cases["breast_cancer"] = (
        X,
        y,
        {
            "n_estimators": 10,
            "norm_methods": ["none", "power", "quantile", "quantile_rtdl", "robust"],
        },
    )
    y = np.repeat(np.arange(25), 8)
    X = rng.normal(size=(200, 4)) + 0.3 * (y[:, None] % 3)
    cases["classes25"] = (X, y, {"n_estimators": 6})
    out = {"classes25_X": X}
    cases["frame"] = (*make_frame(), {"n_estimators": 12})
    for name, (X, y, params) in cases.items():
        order = rng.permutation(len(y))
        train, test = order[: int(0.7 * len(y))], order[int(0.7 * len(y)) :]
        clf = TabICLClassifier(
            model_path=ckpt, use_amp=False, device="cpu", random_state=42, **params
        )
        take = (lambda X, i: X.iloc[i]) if hasattr(X, "iloc") else (lambda X, i: X[i])
        clf.fit(take(X, train), y[train])
        out[f"{name}_train"], out[f"{name}_test"] = train, test
        out[f"{name}_proba"] = clf.predict_proba(take(X, test))
        print(name, out[f"{name}_proba"].shape, file=sys.stderr)
    ckpt.unlink()
    np.savez_compressed(HERE / "v1_reference.npz", **out)


if __name__ == "__main__":
    main()
