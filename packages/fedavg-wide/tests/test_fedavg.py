"""FedAvg and the centralized reference: exact identities, the weighted server mean,
partial participation, errors."""

import copy
import math

import numpy as np
import pytest
import torch

from fedavg_wide import MLP, FedAvg, centralized_gd, evaluate, load_digits, pathological_partition


def _clients(dtype=torch.float64, n=(5, 9, 14)):
    gen = torch.Generator().manual_seed(0)
    out = []
    for i, size in enumerate(n):
        x = torch.randn(size, 3, generator=gen, dtype=dtype) + i  # covariate-shifted clients
        out.append((x, torch.sin(x.sum(1, keepdim=True)) + i))  # and label-shifted
    return out


@pytest.mark.parametrize("width", [8, 512])
def test_one_local_step_full_batch_fedavg_is_centralized_gd_at_any_width(width):
    clients = _clients()
    model = MLP(3, 1, width, seed=0).double()
    fed = FedAvg(model, clients, lr=0.3, local_steps=1, rounds=6)
    cen = centralized_gd(model, clients, lr=0.3, local_steps=1, rounds=6)
    np.testing.assert_allclose(fed.train_loss, cen.train_loss, rtol=1e-12)
    x = torch.cat([c[0] for c in clients])
    torch.testing.assert_close(fed.model(x), cen.model(x), rtol=1e-12, atol=1e-12)
    # with tau = 5 the heterogeneous clients drift: no longer the same iteration
    fed5 = FedAvg(model, clients, lr=0.3, local_steps=5, rounds=6)
    cen5 = centralized_gd(model, clients, lr=0.3, local_steps=5, rounds=6)
    assert float((fed5.model(x) - cen5.model(x)).detach().abs().max()) > 1e-3


def test_one_client_fedavg_is_centralized_gd_for_any_tau_even_with_sgd():
    (client,) = _clients(n=(20,))
    model = MLP(3, 1, 16, seed=0).double()
    fed = FedAvg(model, [client], lr=0.2, local_steps=4, rounds=3)
    cen = centralized_gd(model, [client], lr=0.2, local_steps=4, rounds=3)
    np.testing.assert_allclose(fed.train_loss, cen.train_loss, rtol=1e-12)
    assert len(fed.rounds) == 4 and fed.rounds == cen.rounds == [0, 1, 2, 3]


def test_the_server_step_is_the_sample_weighted_mean_of_the_local_models():
    clients = _clients()
    model = MLP(3, 1, 8, seed=0).double()
    states = []

    def after(r, m):
        states.append({k: v.clone() for k, v in m.state_dict().items()})

    FedAvg(model, clients, lr=0.1, local_steps=3, rounds=1, callback=after)
    # redo round 1 by hand: each client from theta0, then the size-weighted mean
    import copy

    from fedavg_wide import local_update

    locals_, sizes = [], []
    for x, y in clients:
        m = copy.deepcopy(model)
        local_update(m, x, y, lr=0.1, local_steps=3)
        locals_.append(m.state_dict())
        sizes.append(len(x))
    w = np.array(sizes) / sum(sizes)
    for k in states[1]:
        expected = sum(float(wi) * s[k] for wi, s in zip(w, locals_, strict=True))
        torch.testing.assert_close(states[1][k], expected, rtol=1e-12, atol=1e-14)


def test_partial_participation_samples_the_stated_number_and_weights_among_them():
    clients = _clients(n=(4, 5, 6, 7, 8))
    model = MLP(3, 1, 8, seed=0).double()
    hist = FedAvg(model, clients, lr=0.1, local_steps=1, rounds=8, participation=0.4, seed=3)
    assert all(len(p) == 2 for p in hist.participants[1:])
    assert len({tuple(p) for p in hist.participants[1:]}) > 1  # resampled every round
    for r, chosen in enumerate(hist.participants[1:], start=1):
        sat_out = set(range(5)) - set(chosen)
        assert all(math.isnan(hist.local_loss[r][m]) for m in sat_out)
        assert all(math.isfinite(hist.local_loss[r][m]) for m in chosen)
    # tau = 1: one round is a GD step on the participants' pooled loss
    first = hist.participants[1]
    pooled = [
        (torch.cat([clients[m][0] for m in first]), torch.cat([clients[m][1] for m in first]))
    ]
    one = centralized_gd(model, pooled, lr=0.1, local_steps=1, rounds=1)
    check = FedAvg(model, clients, lr=0.1, local_steps=1, rounds=1, participation=0.4, seed=3)
    x = clients[0][0]
    torch.testing.assert_close(check.model(x), one.model(x), rtol=1e-12, atol=1e-12)


def test_sgd_batches_weight_decay_and_history_fields():
    clients = _clients()
    model = MLP(3, 1, 8, seed=0).double()
    a = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2, batch_size=2, seed=1)
    b = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2, batch_size=2, seed=1)
    c = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2, batch_size=2, seed=2)
    assert a.train_loss == b.train_loss != c.train_loss
    d = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2, weight_decay=0.5)
    e = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2)
    norm = lambda m: float(torch.cat([p.detach().reshape(-1) for p in m.parameters()]).norm())  # noqa: E731
    assert norm(d.model) < norm(e.model)
    assert set(a.to_dict()) == {
        "rounds",
        "train_loss",
        "train_accuracy",
        "test_loss",
        "test_accuracy",
        "client_loss",
        "client_accuracy",
        "local_loss",
        "participants",
    }
    assert len(a.client_loss[0]) == 3 and math.isnan(a.test_loss[0])
    # the initial model is not changed
    torch.testing.assert_close(model(clients[0][0]), MLP(3, 1, 8, seed=0).double()(clients[0][0]))


def test_defaults_learn_the_papers_binary_digits_with_pathological_clients():
    Xa, ya, Xb, yb = load_digits(binary=True)
    parts = pathological_partition((ya[:, 0] > 0).int().numpy(), 10, 1)
    clients = [(Xa[i], ya[i]) for i in parts]
    assert all(len(torch.unique(c[1])) == 1 for c in clients)  # one digit per client
    hist = FedAvg(MLP(64, 1, 128, seed=0), clients, lr=1.0, local_steps=5, rounds=10, test=(Xb, yb))
    assert hist.test_accuracy[-1] >= 0.95 and hist.test_loss[-1] < 0.5 * hist.test_loss[0]


def test_cross_entropy_accuracy_and_the_mse_accuracy_rule():
    model = MLP(2, 3, 4, seed=0).double()
    x = torch.randn(6, 2, dtype=torch.float64)
    labels = model(x).argmax(1)
    assert evaluate(model, x, labels, "cross_entropy")[1] == 1.0
    assert evaluate(model, x, torch.nn.functional.one_hot(labels, 3).double(), "mse")[1] == 1.0
    assert math.isnan(evaluate(model, x, torch.randn(6, 3, dtype=torch.float64), "mse")[1])


def test_bad_input_names_the_argument():
    clients = _clients()
    model = MLP(3, 1, 8, seed=0).double()
    with pytest.raises(ValueError, match="local_steps"):
        FedAvg(model, clients, lr=0.1, local_steps=0, rounds=1)
    with pytest.raises(ValueError, match="lr"):
        FedAvg(model, clients, lr=0.0, local_steps=1, rounds=1)
    with pytest.raises(ValueError, match="participation"):
        FedAvg(model, clients, lr=0.1, local_steps=1, rounds=1, participation=0.0)
    empty = (torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"clients\[1\] has no data"):
        FedAvg(model, [clients[0], empty], lr=0.1, local_steps=1, rounds=1)
    with pytest.raises(TypeError, match="single"):
        FedAvg(model, clients[0], lr=0.1, local_steps=1, rounds=1)
    with pytest.raises(ValueError, match=r"clients\[0\]: y must be one-dimensional"):
        FedAvg(model, clients, lr=0.1, local_steps=1, rounds=1, loss="cross_entropy")
    nan = (clients[0][0].clone(), clients[0][1].clone())
    nan[0][0, 0] = math.nan
    with pytest.raises(ValueError, match="finite"):
        FedAvg(model, [nan], lr=0.1, local_steps=1, rounds=1)
    with pytest.raises(FloatingPointError, match=r"lr=1e\+06; lower lr"):
        FedAvg(model, clients, lr=1e6, local_steps=5, rounds=5)


def test_targets_of_the_wrong_shape_are_refused_not_broadcast():
    clients = _clients()
    model = MLP(3, 1, 8, seed=0).double()
    wide = [(x, y.repeat(1, 3)) for x, y in clients]  # (n, 3) targets for a 1-output model
    with pytest.raises(
        ValueError, match=r"clients\[0\]: y must have shape \(5, 1\) .* got \(5, 3\)"
    ):
        FedAvg(model, wide, lr=0.1, local_steps=1, rounds=1)
    flat = [(x, y[:, 0]) for x, y in clients]  # (n,) targets are a column, as before
    assert len(FedAvg(model, flat, lr=0.1, local_steps=1, rounds=1).train_loss) == 2


def test_class_labels_are_checked_against_the_outputs():
    clients = [(x, (torch.arange(len(x)) % 3)) for x, _ in _clients()]
    model = MLP(3, 3, 8, seed=0).double()
    FedAvg(model, clients, lr=0.1, local_steps=1, rounds=1, loss="cross_entropy")
    bad = [(x, y + 1) for x, y in clients]  # label 3 for a 3-output model
    with pytest.raises(ValueError, match=r"y must hold labels below n_classes=3, got 3"):
        FedAvg(model, bad, lr=0.1, local_steps=1, rounds=1, loss="cross_entropy")
    with pytest.raises(ValueError, match=r"test: y must hold labels >= 0"):
        FedAvg(
            model,
            clients,
            lr=0.1,
            local_steps=1,
            rounds=1,
            loss="cross_entropy",
            test=(clients[0][0], -clients[0][1] - 1),
        )


def test_a_linearized_model_running_away_stops_naming_lr():
    """A linearized network at too large a step grows without bound while staying finite
    (outputs ~1e13 in the report); the run stops once the loss is 1e6 times its start."""
    from fedavg_wide import linearize

    clients = _clients()
    model = linearize(MLP(3, 1, 64, seed=0).double())
    with pytest.raises(FloatingPointError, match=r"global training loss became .*beyond .*lr=50"):
        FedAvg(model, clients, lr=50.0, local_steps=1, rounds=200)


class _BatchNormDropout(torch.nn.Module):
    """A user's model with both kinds of mode-dependent layer."""

    def __init__(self, n_in=64, n_out=1, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(n_in, 32),
            torch.nn.BatchNorm1d(32),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.5),
            torch.nn.Linear(32, n_out),
        )

    def forward(self, x):
        return self.net(x.flatten(1))


def _digit_clients(n=3):
    from fedavg_wide import Settings, federated_data

    return federated_data(Settings(partition="iid", dtype="float64"), n)


def test_batch_norm_and_dropout_models_train_in_train_mode_and_are_evaluated_in_eval_mode():
    clients, test = _digit_clients()
    model = _BatchNormDropout().double()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hist = FedAvg(model, clients, lr=0.1, local_steps=3, rounds=2, batch_size=16, test=test)
    out = hist.model
    assert not out.training
    x = test[0][:20]
    with torch.no_grad():
        assert torch.equal(out(x), out(x))  # dropout off
    bn = out.net[1]
    stats = (bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone())
    evaluate(out, *test)  # evaluation leaves the running statistics alone
    assert torch.equal(bn.running_mean, stats[0]) and torch.equal(bn.running_var, stats[1])
    assert torch.equal(bn.num_batches_tracked, stats[2])
    # the running statistics were averaged from the clients' training passes, not from
    # evaluation: 2 rounds x 3 local steps, every client alike
    assert int(bn.num_batches_tracked) == 6
    assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
    # the user's model is untouched (mode and state)
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    # the reported accuracy is the eval-mode accuracy of the returned model
    assert hist.test_accuracy[-1] == evaluate(out, *test)[1]


def test_buffers_are_averaged_like_parameters():
    """One round, two clients of equal size: the global running mean is the mean of the
    two clients' running means after their local steps (same seeds as FedAvg uses)."""
    from fedavg_wide import batch_seed, local_update

    clients, _ = _digit_clients(2)
    n = min(len(clients[0][0]), len(clients[1][0]))
    clients = [(x[:n], y[:n]) for x, y in clients]
    model = _BatchNormDropout().double()
    hist = FedAvg(model, clients, lr=0.1, local_steps=2, rounds=1, seed=3)
    means = []
    for m, (x, y) in enumerate(clients):
        local = copy.deepcopy(model)
        local_update(local, x, y, lr=0.1, local_steps=2, seed=batch_seed(3, 1, m))
        means.append(local.net[1].running_mean)
    torch.testing.assert_close(
        hist.model.net[1].running_mean, (means[0] + means[1]) / 2, rtol=1e-12, atol=1e-15
    )


def test_local_update_seeds_its_dropout_and_leaves_the_global_generator_alone():
    from fedavg_wide import local_update

    (x, y), *_ = _digit_clients(2)[0]
    a, b = _BatchNormDropout().double(), _BatchNormDropout().double()
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    local_update(a, x, y, lr=0.1, local_steps=2, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    local_update(b, x, y, lr=0.1, local_steps=2, seed=5)
    for (k, u), v in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(u, v), k
    assert a.training  # its mode is restored
