"""align: only the image tower moves, the schedule, the kernel parameters, checkpoints."""

import math
import shutil
import warnings

import pytest
import torch

from kuea import PixelStatsTeacher, align, image_tower, latest_checkpoint, make_shapes, tiny_clip
from kuea.alignment import _lr_factor
from kuea.towers import parameters_digest

WORLD = make_shapes(48, seed=0)
TEACHER = PixelStatsTeacher().fit(WORLD.images)


def _vision(model):
    return parameters_digest(iter(image_tower(model).trainable.named_parameters()))


def test_defaults_work_and_only_the_image_tower_changes():
    model = tiny_clip(seed=0)
    tower = image_tower(model)
    text_before = parameters_digest(tower.frozen_parameters())
    vision_before = _vision(model)
    result = align(model, TEACHER, WORLD.images, steps=3, batch_size=16, progress=False)
    assert result.model is model
    assert parameters_digest(tower.frozen_parameters()) == text_before  # bitwise
    assert _vision(model) != vision_before
    assert result.kernel_fit is not None and result.kernel.params()["gamma"] > 0
    assert len(result.history["loss"]) == 3 and all(map(math.isfinite, result.history["loss"]))
    assert all(p.requires_grad for p in model.parameters())  # flags restored


def test_frozen_parameters_get_no_gradient():
    model = tiny_clip(seed=0)
    seen = {}

    def callback(step, metrics):
        for name, p in model.named_parameters():
            seen[name] = p.grad is not None and bool(p.grad.abs().sum() > 0)

    align(model, TEACHER, WORLD.images, steps=1, batch_size=16, progress=False, callback=callback)
    assert not any(
        v for k, v in seen.items() if k.startswith(("text_model", "text_projection", "logit"))
    )
    assert any(v for k, v in seen.items() if k.startswith("vision_model"))


def test_loss_decreases_on_a_fixed_batch():
    model = tiny_clip(seed=0)
    x = WORLD.images[:16]
    r = align(
        model, TEACHER, x, steps=40, batch_size=16, lr=1e-3, warmup=1, w_reg=1e-3, progress=False
    )
    assert r.history["align"][-1] < 0.5 * r.history["align"][0]


def test_schedule_warmup_then_cosine_after_the_optimizer():
    model = tiny_clip(seed=0)
    r = align(
        model,
        TEACHER,
        WORLD.images,
        steps=10,
        warmup=4,
        lr=1e-3,
        batch_size=16,
        objective="none",
        progress=False,
    )
    want = [1e-3 * _lr_factor(s, 10, 4) for s in range(10)]
    assert r.history["lr"] == pytest.approx(want)
    assert r.history["lr"][0] == pytest.approx(1e-3 / 4)  # the first step is a warm-up step
    assert r.history["lr"][4] == pytest.approx(1e-3)


@pytest.mark.parametrize("learn", [False, True])
def test_kernel_parameters_learned_only_when_asked(learn):
    model = tiny_clip(seed=0)
    r = align(
        model,
        TEACHER,
        WORLD.images,
        steps=5,
        batch_size=16,
        gamma=0.02,
        c0=0.5,
        learn_kernel_params=learn,
        progress=False,
    )
    moved = r.kernel.params()["gamma"] != pytest.approx(0.02, rel=1e-6)
    assert moved == learn
    assert (len(list(r.kernel.parameters())) > 0) == learn
    device = next(model.parameters()).device
    assert all(t.device == device for t in [*r.kernel.parameters(), *r.kernel.buffers()])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_kernel_parameters_on_the_model_device():
    model = tiny_clip(seed=0).cuda()
    r = align(
        model,
        TEACHER,
        WORLD.images,
        steps=2,
        batch_size=16,
        learn_kernel_params=True,
        progress=False,
    )
    assert all(p.is_cuda and p.grad is not None for p in r.kernel.parameters())


def test_resume_equals_an_uninterrupted_run(tmp_path):
    kw = {"steps": 6, "batch_size": 16, "lr": 1e-3, "progress": False, "learn_kernel_params": True}
    straight = tiny_clip(seed=0)
    align(straight, TEACHER, WORLD.images, **kw)
    # a 6-step run with checkpoints at steps 3 and 6; drop step 6, resume from step 3
    align(
        tiny_clip(seed=0), TEACHER, WORLD.images, checkpoint_dir=tmp_path, checkpoint_every=3, **kw
    )
    assert latest_checkpoint(tmp_path).name == "step-0000006"
    shutil.rmtree(tmp_path / "step-0000006")
    resumed = tiny_clip(seed=5)  # other weights: the tower comes from the checkpoint
    r = align(resumed, TEACHER, WORLD.images, checkpoint_dir=tmp_path, resume=True, **kw)
    assert r.history["step"] == [1, 2, 3, 4, 5, 6]
    want = image_tower(straight).trainable.state_dict()
    got = image_tower(resumed).trainable.state_dict()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0)
    with pytest.raises(ValueError, match="different settings"):
        align(
            tiny_clip(seed=0),
            TEACHER,
            WORLD.images,
            checkpoint_dir=tmp_path,
            resume=True,
            **{**kw, "lr": 1e-4},
        )


def test_checkpoint_dir_not_overwritten_and_corrupt_files_named(tmp_path):
    kw = {"steps": 2, "batch_size": 16, "progress": False, "checkpoint_dir": tmp_path}
    align(tiny_clip(seed=0), TEACHER, WORLD.images, **kw)
    with pytest.raises(FileExistsError, match="resume=True"):
        align(tiny_clip(seed=0), TEACHER, WORLD.images, **kw)
    (latest_checkpoint(tmp_path) / "tower.safetensors").write_bytes(b"not a safetensors file")
    kw["steps"] = 2
    with pytest.raises(ValueError, match=r"tower\.safetensors"):
        align(tiny_clip(seed=0), TEACHER, WORLD.images, resume=True, **kw)


def test_damaged_or_foreign_checkpoints_are_named(tmp_path):
    """Resume refuses a state.json without settings, an extra file without the RNG, another
    model's tower and NaN weights, naming the file; nothing raw from torch."""
    from safetensors.torch import load_file, save_file

    kw = {"steps": 2, "batch_size": 16, "progress": False, "checkpoint_dir": tmp_path}
    align(tiny_clip(seed=0), TEACHER, WORLD.images, **kw)
    last = latest_checkpoint(tmp_path)
    pristine = tmp_path.parent / "pristine"
    shutil.copytree(tmp_path, pristine)

    def damaged(change):
        shutil.rmtree(tmp_path)
        shutil.copytree(pristine, tmp_path)
        change()
        align(tiny_clip(seed=0), TEACHER, WORLD.images, resume=True, **kw)

    with pytest.raises(ValueError, match=r"state\.json' is corrupt: .*'settings'"):
        damaged(lambda: (last / "state.json").write_text('{"step": 2, "history": []}'))

    def drop_rng():
        extra = load_file(str(last / "extra.safetensors"))
        del extra["rng"]
        save_file(extra, str(last / "extra.safetensors"))

    with pytest.raises(ValueError, match=r"extra\.safetensors' lacks the RNG state"):
        damaged(drop_rng)

    def foreign_tower():
        other = {
            k: v.contiguous()
            for k, v in image_tower(tiny_clip(seed=0, hidden=16)).trainable.state_dict().items()
        }
        save_file(other, str(last / "tower.safetensors"))

    with pytest.raises(ValueError, match=r"tower\.safetensors holds tensors of the wrong shape"):
        damaged(foreign_tower)

    def nan_tower():
        tower = load_file(str(last / "tower.safetensors"))
        next(v for v in tower.values() if v.is_floating_point()).view(-1)[0] = float("nan")
        save_file(tower, str(last / "tower.safetensors"))

    with pytest.raises(ValueError, match=r"tower\.safetensors holds NaN or infinite weights"):
        damaged(nan_tower)


def test_numpy_images_align_and_integer_images_are_refused():
    result = align(
        tiny_clip(seed=0), TEACHER, WORLD.images.numpy(), steps=1, batch_size=16, progress=False
    )
    assert len(result.history["loss"]) == 1
    with pytest.raises(TypeError, match="images must be float pixel values"):
        align(tiny_clip(seed=0), TEACHER, WORLD.images.to(torch.uint8), steps=1, progress=False)


def test_objectives():
    for objective in ("feature_l2", "none"):
        model = tiny_clip(seed=0)
        r = align(
            model,
            TEACHER,
            WORLD.images,
            steps=2,
            batch_size=16,
            objective=objective,
            progress=False,
        )
        assert r.kernel is None and (r.head is not None) == (objective == "feature_l2")
    # the regulariser alone: zero loss and zero gradient at the first step
    assert r.history["loss"][0] == 0.0


def test_batch_size_warning():
    with pytest.warns(UserWarning, match="w_align"):
        align(tiny_clip(seed=0), TEACHER, WORLD.images, steps=1, batch_size=512, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        align(
            tiny_clip(seed=0),
            TEACHER,
            WORLD.images,
            steps=1,
            batch_size=512,
            w_align=8.0,
            progress=False,
        )


def test_bad_input():
    model = tiny_clip(seed=0)
    with pytest.raises(ValueError, match="empty"):
        align(model, TEACHER, WORLD.images[:0], steps=1, progress=False)
    with pytest.raises(ValueError, match="expects 32x32"):
        align(model, TEACHER, torch.zeros(8, 3, 16, 16), steps=1, progress=False)
    with pytest.raises(ValueError, match="teacher must return"):
        align(model, lambda x: torch.zeros(len(x) + 1, 4), WORLD.images, steps=1, progress=False)
    with pytest.raises(ValueError, match="learn_kernel_params"):
        align(
            model, TEACHER, WORLD.images, kernel="cosine", learn_kernel_params=True, progress=False
        )
    with pytest.raises(ValueError, match="objective"):
        align(model, TEACHER, WORLD.images, objective="ce", progress=False)
    with pytest.raises(TypeError, match="images"):
        align(model, TEACHER, 3, progress=False)
    with pytest.raises(ValueError, match="teacher returned NaN"):
        align(
            model,
            lambda x: torch.full((len(x), 4), float("nan")),
            WORLD.images,
            steps=1,
            gamma=0.1,
            c0=1.0,
            progress=False,
        )
    with pytest.raises(FloatingPointError, match="lower lr"):  # the teacher kernel overflows
        align(
            model,
            lambda x: torch.full((len(x), 4), 1e20),
            WORLD.images,
            steps=1,
            gamma=0.1,
            c0=1.0,
            progress=False,
        )


def test_dataset_input_equals_tensor_input():
    ds = torch.utils.data.TensorDataset(WORLD.images, torch.zeros(len(WORLD)))
    a, b = tiny_clip(seed=0), tiny_clip(seed=0)
    kw = {"steps": 3, "batch_size": 16, "gamma": 0.05, "c0": 1.0, "progress": False}
    align(a, TEACHER, WORLD.images, **kw)
    align(b, TEACHER, ds, **kw)
    assert _vision(a) == _vision(b)


class _ModuleTeacher(torch.nn.Module):
    """A teacher that is an ``nn.Module`` with dropout (its mode matters)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.proj(x.mean(dim=(2, 3))))


def test_the_callers_teacher_is_not_mutated():
    teacher = _ModuleTeacher().train()
    align(tiny_clip(seed=0), teacher, WORLD.images, steps=2, batch_size=16, progress=False)
    assert teacher.training  # mode restored
    assert all(p.requires_grad for p in teacher.parameters())  # flags never touched
    assert all(p.grad is None for p in teacher.parameters())  # and no gradient reached it


def test_gamma_without_c0_is_refused():
    with pytest.raises(ValueError, match=r"gamma= needs c0=.*0\.0032, c0=0\.191623"):
        align(tiny_clip(seed=0), TEACHER, WORLD.images, steps=1, gamma=0.0032, progress=False)
    # both, or c0 alone, are accepted
    result = align(
        tiny_clip(seed=0),
        TEACHER,
        WORLD.images,
        steps=1,
        batch_size=16,
        gamma=0.0032,
        c0=0.191623,
        progress=False,
    )
    assert result.kernel_fit is None


def test_kernel_parameters_are_fitted_on_a_random_sample(monkeypatch):
    import kuea.alignment as A

    seen = []
    gather = A._gather

    def spy(data, indices):
        seen.append(list(indices))
        return gather(data, indices)

    monkeypatch.setattr(A, "_gather", spy)
    for seed in (0, 1):
        align(
            tiny_clip(seed=0),
            TEACHER,
            WORLD.images,
            steps=1,
            batch_size=16,
            fit_images=20,
            seed=seed,
            progress=False,
        )
    fits = [s for s in seen if len(s) == 20]
    assert len(fits) == 2 and fits[0] != list(range(20)) and fits[0] != fits[1]
    assert fits[0] == sorted(
        torch.randperm(48, generator=torch.Generator().manual_seed(0))[:20].tolist()
    )


def test_the_teacher_kernel_keeps_its_own_degree(monkeypatch):
    import kuea.alignment as A

    degrees = []
    kernel = A.teacher_kernel

    def spy(d, kind="polynomial", **kw):
        degrees.append(kw.get("degree"))
        return kernel(d, kind, **kw)

    monkeypatch.setattr(A, "teacher_kernel", spy)
    align(
        tiny_clip(seed=0), TEACHER, WORLD.images, steps=2, batch_size=16, degree=2, progress=False
    )
    assert degrees and set(degrees) == {3}  # the student is quadratic, the teacher cubic


def test_dataloader_and_workers_give_the_same_run():
    ds = torch.utils.data.TensorDataset(WORLD.images, torch.zeros(len(WORLD)))
    kw = {"steps": 4, "batch_size": 16, "progress": False}  # gamma fitted: the sample too
    runs = []
    for images, extra in [
        (ds, {}),
        (ds, {"num_workers": 2}),
        (torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, shuffle=True), {}),
    ]:
        model = tiny_clip(seed=0)
        result = align(model, TEACHER, images, **kw, **extra)
        runs.append((_vision(model), result.history["loss"], result.kernel.params()["gamma"]))
    assert runs[1] == runs[0] and runs[2] == runs[0]  # bitwise: the same batches


def test_bad_dataloaders_are_refused():
    ds = torch.utils.data.TensorDataset(WORLD.images)
    with pytest.raises(ValueError, match="batch_size=8 but batch_size=16"):
        align(tiny_clip(), TEACHER, torch.utils.data.DataLoader(ds, batch_size=8), batch_size=16)

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(WORLD.images)

    with pytest.raises(TypeError, match="map-style"):
        align(tiny_clip(), TEACHER, torch.utils.data.DataLoader(Stream(), batch_size=64))
    with pytest.raises(ValueError, match="num_workers"):
        align(tiny_clip(), TEACHER, ds, num_workers=-1)


def test_a_real_open_clip_model_aligns():
    open_clip = pytest.importorskip("open_clip")
    torch.manual_seed(0)
    model = open_clip.CLIP(  # a ViT CLIP built from a config, 32 px
        embed_dim=16,
        vision_cfg={"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        text_cfg={"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1},
    )
    tower = image_tower(model)
    assert tower.trainable is model.visual and tower.image_size == 32
    with torch.no_grad():
        torch.testing.assert_close(
            tower.encode(WORLD.images[:4]), model.encode_image(WORLD.images[:4])
        )
    frozen = {n.split(".")[0] for n, _ in tower.frozen_parameters()}
    assert {"transformer", "token_embedding", "logit_scale", "text_projection"} <= frozen
    text_before, vision_before = parameters_digest(tower.frozen_parameters()), _vision(model)
    tokens = torch.randint(1, 64, (3, 8))
    with torch.no_grad():
        text_features = model.encode_text(tokens)
    result = align(model, TEACHER, WORLD.images, steps=3, batch_size=16, lr=1e-3, progress=False)
    assert parameters_digest(tower.frozen_parameters()) == text_before  # bitwise
    assert _vision(model) != vision_before
    with torch.no_grad():
        torch.testing.assert_close(model.encode_text(tokens), text_features, rtol=0, atol=0)
    assert result.history["align"][-1] < result.history["align"][0]
    with pytest.raises(ValueError, match="expects 32x32"):
        align(model, TEACHER, torch.zeros(4, 3, 16, 16), steps=1, batch_size=16)
