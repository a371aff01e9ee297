"""torch-geometric's import-time noise, silenced at the import only."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_pyg_import() -> Iterator[None]:
    """Import torch-geometric without its ``torch.jit.script is deprecated``
    FutureWarning: PyG 2.6-2.7 scripts helpers when imported (a dependency's notice,
    nothing a user of this package can act on). Other warnings still show."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning
        )
        yield
