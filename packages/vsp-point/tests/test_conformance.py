"""The package contract (icml25-core's conformance kit)."""

from icml25_core.testing import PackageConformance


class TestConformance(PackageConformance):
    distribution = "vsp-point"

    def _setup(self):
        import torch

        from vsp_point import PointMAEConfig, PointTransformer, ShapeWorld, attach

        torch.manual_seed(0)
        cfg = PointMAEConfig(
            trans_dim=16, depth=1, num_heads=2, encoder_dims=16, num_group=4, group_size=4
        )
        model = attach(PointTransformer(cfg), num_classes=2, adapter="linear")
        x, y = ShapeWorld(("sphere", "jack"), num_points=32).sample(4, seed=0)
        return model, x, y

    def divergent_training(self):
        from vsp_point import fit, pretrain_point_mae

        model, x, y = self._setup()
        cfg = model.backbone.config
        return {
            "fit": (lambda: fit(model, x, y, epochs=3, batch_size=4, lr=1e12), "lr"),
            "pretrain_point_mae": (
                lambda: pretrain_point_mae(x, config=cfg, steps=5, batch_size=4, lr=1e12),
                "lr",
            ),
        }

    def label_consumers(self):
        import torch

        from vsp_point import evaluate, fit

        model, x, y = self._setup()

        def fitting(labels):
            fit(model, x, torch.as_tensor(labels), epochs=1)

        def evaluating(labels):
            evaluate(model, x, torch.as_tensor(labels))

        return {
            "fit": (fitting, "labels", y.numpy(), 2),
            "evaluate": (evaluating, "labels", y.numpy(), 2),
        }

    def pretrained_models(self):
        from vsp_point import PointMAEConfig, PointTransformer

        cfg = PointMAEConfig(
            trans_dim=16, depth=1, num_heads=2, encoder_dims=16, num_group=4, group_size=4
        )
        return [PointTransformer(cfg)]
