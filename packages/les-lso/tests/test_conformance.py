"""The package contract (icml25-core's conformance kit), with the persistence of both
VAE decoders."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "les-lso"

    def divergent_training(self):
        import torch

        from les_lso import SequenceVAE, train_vae

        torch.manual_seed(0)
        vae = SequenceVAE(vocab_size=5, max_length=8, latent_dim=3, hidden_size=8, num_layers=1)
        tokens = (torch.arange(32) % 5)[:, None].expand(32, 8)
        return {"train_vae": (lambda: train_vae(vae, tokens, epochs=3, lr=1e9), "lr")}

    def pretrained_models(self):
        from les_lso import SequenceVAE

        tiny = dict(vocab_size=5, max_length=8, latent_dim=3, hidden_size=8, num_layers=1)
        return [SequenceVAE(**tiny), SequenceVAE(decoder="transformer", num_heads=2, **tiny)]
