"""Readings of the device a model replica runs on: the inputs of the breaker's resource
triggers and of the batch policy's memory pressure."""

from __future__ import annotations

import sys

import psutil

from policies.breaker import Resources


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _engine_cuda():
    """torch, where this process has loaded it and sees a CUDA device; else None. A
    replica's vLLM engine loads torch before the replica reads its device; one that has not
    loaded it (the fake engine) runs on none, and importing torch just to ask cost each
    such replica 2.3 s of start-up CPU (a fifth of a test graph's deploy)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and torch.cuda.is_available() else None


def accelerator_memory_gib() -> float | None:
    """Memory of this replica's accelerator; None on CPU."""
    torch = _engine_cuda()
    if torch is None:
        return None
    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30


def read_resources() -> Resources:
    """Host CPU; accelerator memory and utilization where there is one, else host RAM."""
    cpu = psutil.cpu_percent(interval=None)
    torch = _engine_cuda()
    if torch is not None:
        free, total = torch.cuda.mem_get_info()
        try:
            utilization = float(torch.cuda.utilization())
        except Exception:  # needs pynvml; without it the trigger just cannot fire
            utilization = None
        return Resources(cpu, 100.0 * (total - free) / total, utilization)
    return Resources(cpu, psutil.virtual_memory().percent, None)
