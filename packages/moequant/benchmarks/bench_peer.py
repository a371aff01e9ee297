"""Benchmark against the peer library (not written yet)."""


def run(smoke: bool = False):
    raise NotImplementedError("moequant: the benchmark is not written yet")
