"""icml25_core.flower: the in-process engine's contract (needs the ``flower`` extra)."""

import pytest

pytest.importorskip("flwr")

from flwr.server.superlink.fleet.vce.backend import BackendConfig

from icml25_core.flower import InProcessBackend, run_simulation, simulate_with_result


def test_run_simulation_refuses_bad_engine_and_supernodes():
    with pytest.raises(ValueError, match="engine"):
        run_simulation(None, None, 2, engine="threads")
    with pytest.raises(ValueError, match="num_supernodes"):
        run_simulation(None, None, 0)
    with pytest.raises(ValueError, match="min_nodes=3 exceeds num_supernodes=2"):
        simulate_with_result(None, None, {"min_nodes": 3}, 2)
    with pytest.raises(ValueError, match="num_supernodes"):
        simulate_with_result(None, None, {}, "2")


def test_in_process_backend_runs_the_app_and_wraps_its_errors_as_flower_does():
    from flwr.clientapp.client_app import ClientAppException

    backend = InProcessBackend(BackendConfig())
    with pytest.raises(ValueError, match="build"):
        backend.process_message("msg", "ctx")
    backend.build(lambda: lambda message, context: ("reply to", message))
    assert backend.process_message("msg", "ctx") == (("reply to", "msg"), "ctx")
    assert backend.num_workers == 1 and backend.is_worker_idle()

    def failing():
        def app(message, context):
            raise RuntimeError("client bug")

        return app

    backend.build(failing)
    with pytest.raises(ClientAppException, match="client bug"):
        backend.process_message("msg", "ctx")
