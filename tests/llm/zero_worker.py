"""One rank of a ZeRO-2 training that is killed after a step (run by test_llm_zero.py under
torchrun): ``zero_worker.py CONFIG METHOD KILL_AT_STEP``. The checkpoint it leaves behind is
what the test resumes; it is gathered in pieces of GATHER_CHUNK elements, fewer than the
largest trainable tensor holds, so that parameters straddle pieces."""

import sys

from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.llm.deepspeed_backend import ZeroBackend

GATHER_CHUNK = 100


class Killed(Exception):
    pass


def kill_at(step: int):
    def hook(s: int) -> None:
        if s == step:
            raise Killed

    return hook


if __name__ == "__main__":
    config, method, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ZeroBackend.gather_chunk = GATHER_CHUNK
    try:
        train_task(load_config(config), method, 0, 1, on_step=kill_at(step))
    except Killed:
        sys.exit(0)
    sys.exit(f"rank was not killed at step {step}")
