"""Poincare-ball oracles: exp/log inverses, points stay inside, distances equal the closed
form and geoopt's, and the hyperbolic convolution tends to PyG's GCNConv as c -> 0."""

import pytest
import torch
from torch_geometric.nn import GCNConv

from geo_tlp import GeoTLPNet, HypGCNConv, poincare_ball


@pytest.mark.parametrize("c", [0.5, 1.0, 2.0])
def test_expmap0_inverts_logmap0(c):
    ball = poincare_ball(c)
    torch.manual_seed(0)
    x = ball.expmap0(torch.randn(50, 6, dtype=torch.float64))
    torch.testing.assert_close(ball.expmap0(ball.logmap0(x)), x)


def test_layers_keep_points_inside_the_ball():
    torch.manual_seed(0)
    c = 1.5
    ball = poincare_ball(c)
    conv = HypGCNConv(5, 7, ball).double()
    with torch.no_grad():
        conv.lin.weight.mul_(50.0)  # push hard towards the boundary
    x = ball.expmap0(3 * torch.randn(20, 5, dtype=torch.float64))
    ei = torch.randint(0, 20, (2, 60))
    y = conv(x, ei)
    assert torch.isfinite(y).all()
    assert (y.norm(dim=-1) < 1 / c**0.5).all()


def test_decoder_distance_is_the_poincare_closed_form():
    net = GeoTLPNet(10, routing="hyperbolic").double()
    torch.manual_seed(1)
    state = net.init_state()
    state["s_h"] = torch.randn(10, net.dim, dtype=torch.float64) * 0.3
    p = net.embeddings(state)["p"]
    pairs = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    x, y = p[pairs[0]], p[pairs[1]]
    closed = torch.acosh(
        1 + 2 * (x - y).pow(2).sum(-1) / ((1 - x.pow(2).sum(-1)) * (1 - y.pow(2).sum(-1)))
    )
    torch.testing.assert_close(net.sq_distance(state, pairs), closed.pow(2))
    torch.testing.assert_close(net.ball.dist(x, y), closed)


def test_hyperbolic_convolution_tends_to_gcnconv_as_curvature_vanishes():
    torch.manual_seed(0)
    x = 0.5 * torch.randn(12, 4, dtype=torch.float64)
    ei = torch.randint(0, 12, (2, 40))
    ei = ei[:, ei[0] != ei[1]]
    gcn = GCNConv(4, 3).double()
    torch.nn.init.normal_(gcn.bias)
    expected = torch.relu(gcn(x, ei))
    errors = []
    for c in (1e-2, 1e-4, 1e-6):
        ball = poincare_ball(c)
        hyp = HypGCNConv(4, 3, ball).double()
        with torch.no_grad():
            hyp.lin.weight.copy_(gcn.lin.weight)
            hyp.bias.copy_(gcn.bias)
        got = ball.logmap0(hyp(ball.expmap0(x), ei))
        errors.append(float((got - expected).abs().max()))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-5


def test_nonpositive_curvature_is_refused():
    with pytest.raises(ValueError, match="curvature"):
        poincare_ball(0.0)
