"""FedDDAModel on a tiny random CLIP: oracles and invariants."""

import pytest
import torch

from feddda.model import FedDDAModel

CLASSES = ["red circle", "blue square", "green triangle"]


def test_prompt_with_word_contexts_equals_clips_own_text_features(clip, tokenizer):
    """Contexts set to the embeddings of real words give CLIP's feature of that sentence."""
    model = FedDDAModel(clip, tokenizer, CLASSES, n_global=1, n_local=1, adapters=False)
    emb = clip.text_model.embeddings.token_embedding.weight
    word = lambda w: emb[tokenizer(w, add_special_tokens=False)["input_ids"][0]]  # noqa: E731
    with torch.no_grad():
        model.prompt.global_ctx.copy_(word("a")[None])
        model.prompt.local_ctx.copy_(word("sketch")[None])
        ours = model.text_features()
        ids = tokenizer([f"a {c} with a style of sketch ." for c in CLASSES], return_tensors="pt")
        theirs = clip.get_text_features(**ids)
        theirs = getattr(theirs, "pooler_output", theirs)
    torch.testing.assert_close(ours, torch.nn.functional.normalize(theirs, dim=-1))


def test_gate_rows_sum_to_one_and_state_parts_are_disjoint(clip, tokenizer):
    model = FedDDAModel(clip, tokenizer, CLASSES, n_global=4, n_local=4)
    f = torch.randn(5, 16)
    torch.testing.assert_close(model.gate_weights(f).sum(-1), torch.ones(5))
    shared, personal = model.shared_state(), model.personal_state()
    assert not set(shared) & set(personal)
    assert set(shared) | set(personal) == set(model.trainable_state())
    assert set(shared) == {
        "prompt.global_ctx",
        "shared_adapter.down.weight",
        "shared_adapter.up.weight",
    }


def test_training_changes_only_the_learnable_parts(clip, tokenizer):
    model = FedDDAModel(clip, tokenizer, CLASSES, n_global=4, n_local=4)
    frozen = {k: v.clone() for k, v in clip.state_dict().items()}
    before = {k: v.clone() for k, v in model.trainable_state().items()}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    x, y = torch.randn(6, 3, 32, 32), torch.tensor([0, 1, 2, 0, 1, 2])
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(frozen[k], v) for k, v in clip.state_dict().items())
    after = model.trainable_state()
    assert all(not torch.equal(before[k], after[k]) for k in before)


def test_bad_input(clip, tokenizer):
    with pytest.raises(ValueError, match="distinct"):
        FedDDAModel(clip, tokenizer, ["red circle", "red circle"])
    with pytest.raises(ValueError, match="unknown class name"):
        FedDDAModel(clip, tokenizer, ["red circle", "purple hexagon"], n_global=4, n_local=4)
    with pytest.raises(ValueError, match="tokens, more than"):
        FedDDAModel(clip, tokenizer, CLASSES, n_global=30, n_local=16)
    model = FedDDAModel(clip, tokenizer, CLASSES, n_global=4, n_local=4)
    other = FedDDAModel(clip, tokenizer, CLASSES, n_global=6, n_local=4)
    with pytest.raises(ValueError, match=r"does not match .*n_global / n_local differ"):
        model.load_partial(other.shared_state())
    with pytest.raises(ValueError, match="unknown or frozen"):
        model.load_partial({"clip.logit_scale": torch.zeros(())})
