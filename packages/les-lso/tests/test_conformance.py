"""The package contract (icml25-core's conformance kit), with the persistence of both
VAE decoders."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "les-lso"

    def pretrained_models(self):
        from les_lso import SequenceVAE

        tiny = dict(vocab_size=5, max_length=8, latent_dim=3, hidden_size=8, num_layers=1)
        return [SequenceVAE(**tiny), SequenceVAE(decoder="transformer", num_heads=2, **tiny)]
