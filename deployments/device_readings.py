"""Readings of the device a model replica runs on: the inputs of the breaker's resource
triggers and of the batch policy's memory pressure."""

from __future__ import annotations

import psutil

from policies.breaker import Resources


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def accelerator_memory_gib() -> float | None:
    """Memory of this replica's accelerator; None on CPU."""
    if not cuda_available():
        return None
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30


def read_resources() -> Resources:
    """Host CPU; accelerator memory and utilization where there is one, else host RAM."""
    cpu = psutil.cpu_percent(interval=None)
    if cuda_available():
        import torch

        free, total = torch.cuda.mem_get_info()
        try:
            utilization = float(torch.cuda.utilization())
        except Exception:  # needs pynvml; without it the trigger just cannot fire
            utilization = None
        return Resources(cpu, 100.0 * (total - free) / total, utilization)
    return Resources(cpu, psutil.virtual_memory().percent, None)
