"""The Flower app runs the same algorithm as the plain loop."""

import pytest
import torch

from fedavg_wide import FedAvg, Settings, build_model, federated_data, simulate


@pytest.mark.parametrize(
    "extra",
    [
        {"batch_size": 8},  # SGD: the client uses the plain loop's mini-batch seeds
        {"dataset": "digits", "loss": "cross_entropy", "partition": "dirichlet", "model": "cnn"},
    ],
)
def test_flower_app_equals_the_plain_loop(extra):
    settings = {
        "width": 16,
        "depth": 1,
        "num_server_rounds": 2,
        "local_steps": 3,
        "dtype": "float64",
        "lr": 0.5,
        **extra,
    }
    out = simulate(settings, num_supernodes=3)
    s = Settings(**settings)
    clients, test = federated_data(s, 3)
    ref = FedAvg(
        build_model(s),
        clients,
        s.lr,
        s.local_steps,
        s.num_server_rounds,
        batch_size=s.batch_size or None,
        loss=s.loss,
        test=test,
    )
    assert out["rounds"] == ref.rounds == [0, 1, 2]
    for key in ("train_loss", "test_loss", "test_accuracy"):
        torch.testing.assert_close(
            torch.tensor(out[key]), torch.tensor(getattr(ref, key)), rtol=1e-6, atol=1e-9
        )
    for k, v in ref.model.state_dict().items():
        torch.testing.assert_close(out["state_dict"][k], v, rtol=1e-6, atol=1e-9)


def test_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="width"):
        Settings(width=0)
    with pytest.raises(ValueError, match="local_steps"):
        Settings(local_steps=0)
    with pytest.raises(ValueError, match="cross_entropy"):
        Settings(dataset="digits")
    with pytest.raises(ValueError, match="unknown setting"):
        Settings.from_config({"widht": 3})
    with pytest.raises(ValueError, match="min_nodes"):
        simulate({"min_nodes": 5}, num_supernodes=2)
    assert Settings.from_config({"local-steps": 2}).local_steps == 2


def test_a_users_model_and_data_run_on_the_flower_app_as_in_the_plain_loop():
    """model_fn / data_fn: a batch-norm + dropout model on the user's own split; the Flower
    app (which ships buffers) and the plain loop give the same global state."""
    from .test_fedavg import _BatchNormDropout

    settings = {"num_server_rounds": 2, "local_steps": 2, "lr": 0.1, "batch_size": 8}

    def model_fn(s):
        return _BatchNormDropout(seed=7).double()

    def data_fn(s, n):
        gen = torch.Generator().manual_seed(0)
        X = torch.randn(60, 64, generator=gen, dtype=torch.float64)
        y = torch.sign(X[:, :1] + 0.1)
        return [(X[i::n], y[i::n]) for i in range(n)], (X[:10], y[:10])

    out = simulate(settings, num_supernodes=3, model_fn=model_fn, data_fn=data_fn)
    clients, test = data_fn(None, 3)
    ref = FedAvg(model_fn(None), clients, 0.1, 2, 2, batch_size=8, test=test)
    torch.testing.assert_close(torch.tensor(out["train_loss"]), torch.tensor(ref.train_loss))
    for k, v in ref.model.state_dict().items():
        torch.testing.assert_close(out["state_dict"][k], v, rtol=1e-9, atol=1e-12)
    assert int(out["state_dict"]["net.1.num_batches_tracked"]) == 4
