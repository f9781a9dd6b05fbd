"""Device readings of a replica whose engine holds no accelerator (the fake engine)."""

import subprocess
import sys

from models.build import ROOT


def test_a_replica_without_torch_reads_the_host_without_importing_torch():
    # Importing torch only to ask for CUDA cost each fake-engine replica 2.3 s of start-up CPU.
    code = (
        "import sys\n"
        "from deployments.engines.device_readings import accelerator_memory_gib, read_resources\n"
        "assert accelerator_memory_gib() is None\n"
        "r = read_resources()\n"
        "assert r.utilization_percent is None and 0 < r.memory_percent <= 100, r\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
