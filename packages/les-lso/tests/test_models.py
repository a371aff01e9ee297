"""The VAEs: peers' equality (torch.nn.GRU, torch.nn.LSTM, torch.nn.TransformerDecoderLayer),
the reference's decoder forward written with torch's fused RNNs, the official checkpoint
loader, encoding/decoding, the KL term, training."""

import pytest
import torch
import torch.nn.functional as F

from les_lso import SequenceVAE, train_vae
from les_lso.models import _Attention, _DecoderLayer


def test_gru_stack_equals_torch_gru(tiny_vae):
    vae = tiny_vae("gru", num_layers=3)
    stack = vae.decoder.gru
    peer = torch.nn.GRU(8, 8, num_layers=3, batch_first=True).double().eval()
    peer.load_state_dict(stack.state_dict())
    x, h0 = torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 4, 8, dtype=torch.float64)
    out, h = stack.step(x, list(h0))
    want_out, want_h = peer(x[:, None], h0)
    torch.testing.assert_close(out, want_out[:, 0])
    torch.testing.assert_close(torch.stack(h), want_h)


def test_lstm_stack_equals_torch_lstm(tiny_vae):
    vae = tiny_vae("lstm", num_layers=3)
    stack = vae.decoder.gru
    peer = torch.nn.LSTM(8, 8, num_layers=3, batch_first=True).double().eval()
    peer.load_state_dict(stack.state_dict())
    x = torch.randn(4, 8, dtype=torch.float64)
    h0, c0 = torch.randn(3, 4, 8, dtype=torch.float64), torch.randn(3, 4, 8, dtype=torch.float64)
    out, state = stack.step(x, list(zip(h0, c0, strict=True)))
    want_out, (want_h, want_c) = peer(x[:, None], (h0, c0))
    torch.testing.assert_close(out, want_out[:, 0])
    torch.testing.assert_close(torch.stack([h for h, _ in state]), want_h)
    torch.testing.assert_close(torch.stack([c for _, c in state]), want_c)


@pytest.mark.parametrize("decoder", ["gru", "lstm"])
def test_rnn_decoder_equals_the_reference_forward_with_torch_rnns(tiny_vae, decoder):
    """The reference's ``DecoderRNN.forward`` (no teacher forcing), written with torch's
    fused ``nn.GRU`` / ``nn.LSTM`` on our weights (zero initial states, the projected
    latent as every step's input, softmax of the last logits projected beside the output)."""
    vae = tiny_vae(decoder, num_layers=3)
    dec = vae.decoder
    cls = torch.nn.GRU if decoder == "gru" else torch.nn.LSTM
    rnn = cls(8, 8, num_layers=3, batch_first=True, dropout=0.2).double().eval()
    rnn.load_state_dict(dec.gru.state_dict())
    z = torch.randn(6, 3, dtype=torch.float64)
    context = dec.project(z)[:, None]
    h = torch.zeros(3, 6, 8, dtype=torch.float64)
    hidden = h if decoder == "gru" else (h, h.clone())
    out, steps = torch.zeros(6, 1, 5, dtype=torch.float64), []
    for _ in range(8):
        o, hidden = rnn(context, hidden)
        out = dec.out(torch.cat([o, dec.output_projection(out)], dim=-1))
        steps.append(out)
        out = torch.exp(F.log_softmax(out, dim=-1))
    torch.testing.assert_close(dec(z), torch.cat(steps, dim=1))


def test_attention_layer_equals_torch_transformer_decoder_layer():
    torch.manual_seed(0)
    mine = _DecoderLayer(8, 2, 16, 0.0).double().eval()
    peer = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double().eval()

    def pack(attn: _Attention, peer_attn):
        peer_attn.in_proj_weight.data = torch.cat(
            [attn.query.weight, attn.key.weight, attn.value.weight]
        )
        peer_attn.in_proj_bias.data = torch.cat([attn.query.bias, attn.key.bias, attn.value.bias])
        peer_attn.out_proj.load_state_dict(attn.output.state_dict())

    pack(mine.self_attn, peer.self_attn)
    pack(mine.cross_attn, peer.multihead_attn)
    peer.linear1.load_state_dict(mine.ff[0].state_dict())
    peer.linear2.load_state_dict(mine.ff[3].state_dict())
    for k, norm in enumerate((peer.norm1, peer.norm2, peer.norm3)):
        norm.load_state_dict(mine.norms[k].state_dict())
    x, mem = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 2, 8, dtype=torch.float64)
    mask = torch.full((5, 5), float("-inf"), dtype=torch.float64).triu(1)
    torch.testing.assert_close(mine(x, mem, mask), peer(x, mem, tgt_mask=mask))


def _official_state(model: SequenceVAE) -> dict:
    """A state dict laid out as the reference's ``w.pth`` (with its unused embedding and
    property head)."""
    state = dict(model.state_dict())
    state["encoder.embedding.weight"] = torch.randn(model.vocab_size, 100)
    state["property_net.fc1.weight"] = torch.randn(100, model.latent_dim)
    return state


def test_official_checkpoint_loads_weights_only(tmp_path):
    torch.manual_seed(0)
    src = SequenceVAE(logvar_activation="softplus")
    path = tmp_path / "w.pth"
    torch.save(_official_state(src), path)
    loaded = SequenceVAE.from_official_checkpoint(path)
    assert not loaded.training and loaded.logvar_activation == "softplus"
    for key, value in src.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, rtol=0, atol=0)
    tokens = torch.randint(0, 15, (4, 19))
    torch.testing.assert_close(loaded.encode(tokens), src.eval().encode(tokens))


def test_official_checkpoint_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SequenceVAE.from_official_checkpoint(tmp_path / "missing.pth")
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"bad\.pth"):
        SequenceVAE.from_official_checkpoint(bad)
    state = _official_state(SequenceVAE())
    del state["decoder.out.weight"]
    torch.save(state, tmp_path / "partial.pth")
    with pytest.raises(
        ValueError, match=r"partial\.pth does not hold .* missing decoder\.out\.weight"
    ):
        SequenceVAE.from_official_checkpoint(tmp_path / "partial.pth")
    state = _official_state(SequenceVAE())
    state["decoder.out.bias"] = torch.full((15,), float("nan"))
    torch.save(state, tmp_path / "nan.pth")
    with pytest.raises(
        ValueError, match=r"nan\.pth holds NaN or infinite weights in decoder\.out\.bias"
    ):
        SequenceVAE.from_official_checkpoint(tmp_path / "nan.pth")
    state = _official_state(SequenceVAE())
    state["decoder.out.bias"] = torch.zeros(16)
    torch.save(state, tmp_path / "shape.pth")
    with pytest.raises(
        ValueError,
        match=r"shape\.pth holds tensors of the wrong shape .*decoder\.out\.bias \(16,\)",
    ):
        SequenceVAE.from_official_checkpoint(tmp_path / "shape.pth")


@pytest.mark.parametrize("decoder", ["gru", "lstm", "transformer"])
def test_shapes_and_greedy_decoding(tiny_vae, decoder):
    vae = tiny_vae(decoder)
    tokens = torch.randint(0, 5, (6, 8))
    z = vae.encode(tokens)
    assert z.shape == (6, 3)
    assert vae.decoder(z).shape == (6, 8, 5)
    torch.testing.assert_close(vae.decode(z), vae.decoder(z).argmax(-1))
    logits, mu, logvar = vae(tokens)
    assert logits.shape == (6, 8, 5) and mu.shape == logvar.shape == (6, 3)
    assert vae.encode(tokens, sample=True).shape == (6, 3)
    assert vae.sample_prior(4, torch.Generator().manual_seed(0)).shape == (4, 3)


def test_kl_is_zero_at_the_prior_and_positive_elsewhere(tiny_vae):
    vae = tiny_vae("gru")
    zero = torch.zeros(2, 3, dtype=torch.float64)
    torch.testing.assert_close(vae.kl(zero, zero), torch.zeros(2, dtype=torch.float64))
    mu, logvar = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    q = torch.distributions.Normal(mu, vae.eps_std * torch.exp(0.5 * logvar))
    p = torch.distributions.Normal(torch.zeros(3, dtype=torch.float64), vae.eps_std)
    torch.testing.assert_close(vae.kl(mu, logvar), torch.distributions.kl_divergence(q, p).sum(-1))


def test_bad_configuration_and_tokens_are_refused(tiny_vae):
    with pytest.raises(ValueError, match="decoder must be one of"):
        SequenceVAE(decoder="rnn")
    with pytest.raises(ValueError, match="eps_std must be >"):
        SequenceVAE(eps_std=0.0)
    with pytest.raises(ValueError, match="too short"):
        SequenceVAE(max_length=4)
    with pytest.raises(ValueError, match="multiple of num_heads"):
        SequenceVAE(decoder="transformer", hidden_size=10, num_heads=4)
    vae = tiny_vae("gru")
    with pytest.raises(ValueError, match="integer ids"):
        vae.encode(torch.zeros(2, 8))
    with pytest.raises(ValueError, match="max_length=8"):
        vae.encode(torch.zeros(2, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size=5"):
        vae.encode(torch.full((2, 8), 5))


def test_training_lowers_the_loss(tiny_vae):
    vae = tiny_vae("gru", dtype=torch.float32, hidden_size=16, num_layers=1, encoder_size="wide")
    tokens = (torch.arange(64) % 5)[:, None].expand(64, 8)  # five constant sequences
    history = train_vae(vae, tokens, epochs=10, batch_size=16, lr=1e-2, beta=0.0)
    # the marginals are uniform (loss 8 ln 5 = 12.9): going below needs z
    assert len(history) == 10 and history[-1] < 0.5 * history[0]
    assert not vae.training
    with pytest.raises(ValueError, match="epochs must be >="):
        train_vae(vae, tokens, epochs=0)
    bad = tokens.clone()
    bad[-1, -1] = 5  # out of range in the last row only
    with pytest.raises(ValueError, match="vocab_size=5"):
        train_vae(vae, bad, epochs=1)
    for n in (0, 1):  # one row "trained" to loss 0.0, zero rows divided by zero
        with pytest.raises(ValueError, match=f"tokens must hold at least 2 sequences .* got {n}"):
            train_vae(vae, tokens[:n], epochs=1)


def test_an_edited_config_names_the_weights_file_and_tensor(tiny_vae, tmp_path):
    import json

    vae = tiny_vae("gru", dtype=torch.float32)
    vae.save_pretrained(tmp_path / "vae")
    config = json.loads((tmp_path / "vae" / "config.json").read_text())
    config["hidden_size"] = 12
    (tmp_path / "vae" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match=r"model\.safetensors holds tensors of the wrong shape .*\(the model has"
    ):
        type(vae).from_pretrained(tmp_path / "vae")


def test_official_smiles_preset_is_taken_from_the_folder_name(tmp_path):
    from les_lso.models import OFFICIAL_PRESETS

    torch.manual_seed(0)
    src = SequenceVAE(logvar_activation="softplus", **OFFICIAL_PRESETS["smiles_gru"])
    folder = tmp_path / "smiles_gru_0.1"
    folder.mkdir()
    torch.save(_official_state(src), folder / "w.pth")
    loaded = SequenceVAE.from_official_checkpoint(folder / "w.pth")
    assert (loaded.vocab_size, loaded.latent_dim, loaded.eps_std) == (35, 56, 0.001)
    for key, value in src.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, rtol=0, atol=0)
    # the same file under a neutral name needs the preset named
    torch.save(_official_state(src), tmp_path / "w.pth")
    with pytest.raises(ValueError, match=r"w\.pth holds tensors of the wrong shape"):
        SequenceVAE.from_official_checkpoint(tmp_path / "w.pth")
    assert (
        SequenceVAE.from_official_checkpoint(tmp_path / "w.pth", preset="smiles_gru").latent_dim
        == 56
    )
    with pytest.raises(ValueError, match="preset"):
        SequenceVAE.from_official_checkpoint(tmp_path / "w.pth", preset="smiles")
    transformer = tmp_path / "smiles_transformer_1"
    transformer.mkdir()
    torch.save(_official_state(src), transformer / "w.pth")
    with pytest.raises(ValueError, match="official transformer checkpoint; only the GRU and LSTM"):
        SequenceVAE.from_official_checkpoint(transformer / "w.pth")


@pytest.mark.parametrize("preset", ["expressions_lstm", "smiles_lstm"])
def test_official_lstm_checkpoints_load_by_folder_name(tmp_path, preset):
    from les_lso import LSTMDecoder
    from les_lso.models import OFFICIAL_PRESETS

    torch.manual_seed(0)
    src = SequenceVAE(logvar_activation="softplus", **OFFICIAL_PRESETS[preset])
    assert isinstance(src.decoder, LSTMDecoder)
    assert src.decoder.gru.weight_ih_l2.shape == (400, 100)  # the reference's nn.LSTM(100, 100, 3)
    folder = tmp_path / f"{preset}_0.05"
    folder.mkdir()
    torch.save(_official_state(src), folder / "w.pth")
    loaded = SequenceVAE.from_official_checkpoint(folder / "w.pth")
    assert isinstance(loaded.decoder, LSTMDecoder) and not loaded.training
    for key, value in src.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, rtol=0, atol=0)
    # a GRU preset does not take LSTM weights: the error names the file and a tensor
    with pytest.raises(ValueError, match=r"w\.pth holds tensors of the wrong shape"):
        SequenceVAE.from_official_checkpoint(folder / "w.pth", preset=preset.replace("lstm", "gru"))
