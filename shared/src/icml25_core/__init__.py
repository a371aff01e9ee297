"""icml25-core: the shared core of the icml25 method packages.

Method metadata and discovery, the experiment and benchmark harnesses, reports, the
build-once cache, device choice, input validation, the guards of
training loops and weight loading and the ``icml25`` command line. The
conformance kit every package's tests call lives in :mod:`icml25_core.testing`.
"""

from importlib.metadata import version as _version

from .bench import BenchReport, Comparison, Timing, compare, loglog_slope, make_report
from .cache import build_once, cache_dir
from .device import quiet_forward_mode, select_device
from .environment import environment, machine_line, pinned_numerics
from .experiment import PROFILE_NAMES, Experiment, Result, Row, Verdict, mean_metric, run_experiment
from .files import write_json_atomic
from .guards import (
    as_float_tensor,
    check_labels,
    check_loss,
    check_module_finite,
    check_state_dict,
    check_targets,
    load_state_dict_file,
)
from .method import ENTRY_POINT_GROUP, Method, discover_methods, get_method, load_object
from .progress import make_progress, track
from .report import (
    format_value,
    grouped_bars,
    line_panels,
    markdown_table,
    render_result,
    save_figure,
    write_reports,
)
from .validation import (
    as_float_array,
    as_generator,
    available_memory,
    check_array,
    check_choice,
    check_memory,
    check_scalar,
)

__version__ = _version("icml25-core")

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROFILE_NAMES",
    "BenchReport",
    "Comparison",
    "Experiment",
    "Method",
    "Result",
    "Row",
    "Timing",
    "Verdict",
    "__version__",
    "as_float_array",
    "as_float_tensor",
    "as_generator",
    "available_memory",
    "build_once",
    "cache_dir",
    "check_array",
    "check_choice",
    "check_labels",
    "check_loss",
    "check_memory",
    "check_module_finite",
    "check_scalar",
    "check_state_dict",
    "check_targets",
    "compare",
    "discover_methods",
    "environment",
    "format_value",
    "get_method",
    "grouped_bars",
    "line_panels",
    "load_object",
    "load_state_dict_file",
    "loglog_slope",
    "machine_line",
    "make_progress",
    "make_report",
    "markdown_table",
    "mean_metric",
    "pinned_numerics",
    "quiet_forward_mode",
    "render_result",
    "run_experiment",
    "save_figure",
    "select_device",
    "track",
    "write_json_atomic",
    "write_reports",
]
