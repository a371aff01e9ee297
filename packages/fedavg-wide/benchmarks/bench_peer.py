"""Benchmark against the peer library (not written yet)."""


def run(smoke: bool = False):
    raise NotImplementedError("fedavg-wide: the benchmark is not written yet")
