"""One pipeline-parallel rank for test_overlay_pp_reserve.py (run as a script, two at a time).

Joins vLLM's real distributed state with two pipeline stages (gloo on 127.0.0.1), then runs a runner's
``profile_run`` under the overlay's wrapper (``overlay.patches._runner.reserve_during``), with the overlay
on its real CPU lane. The runner is a stand-in with vLLM's real ModelConfig (the real ``profile_run`` needs
a loaded model); its ``profile_run`` notes the q memory the lane holds while it runs, as vLLM's profiler
would see it. Writes what it saw to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import json


class Runner:
    """Only what the wrapper reads: rows, vocabulary, sampler, device."""

    def __init__(self, model_config, sampler) -> None:
        self.max_num_reqs = 8
        self.model_config = model_config
        self.sampler = sampler
        self.device = "cpu"
        self.seen = None

    def profile_run(self, overlay) -> None:
        self.seen = overlay.lane.held_bytes() if overlay.lane is not None else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--config-dir", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import os

    import torch

    torch.set_num_threads(1)
    # What vLLM's CPU worker sets before it joins (vllm/v1/worker/cpu_worker.py): its shared-memory
    # communicator names its segments with it.
    os.environ["VLLM_DIST_IDENT"] = str(args.port)
    from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import get_pp_group, init_distributed_environment, initialize_model_parallel
    from vllm.v1.sample.sampler import Sampler

    from overlay.events import EventLog
    from overlay.lanes import CpuThreadLane
    from overlay.patches._runner import reserve_during
    from overlay.sampler import Overlay, set_active

    config = ModelConfig(model=args.config_dir, tokenizer=args.config_dir, dtype="float32", max_model_len=64,
                         skip_tokenizer_init=True)
    with set_current_vllm_config(VllmConfig(model_config=config)):
        init_distributed_environment(world_size=2, rank=args.rank, local_rank=args.rank, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{args.port}")
        initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=2, backend="gloo")
        ov = Overlay(EventLog(args.log_dir), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))
        set_active(ov)
        runner = Runner(config, Sampler())
        try:
            reserve_during(Runner.profile_run)(runner, ov)
        finally:
            set_active(None)
        seen = {"last": bool(get_pp_group().is_last_rank), "held": runner.seen, "vocab": config.get_vocab_size(),
                "summary": ov.log.summary()}
        ov.shutdown()
        torch.distributed.destroy_process_group()
    with open(args.out, "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main()
    # Everything this rank saw is written and its process group destroyed. Leave without the interpreter's
    # teardown: torch's gloo / TCPStore C++ objects are destroyed there, and now and then (about one run in
    # ten on a loaded 2-core machine, rank 0: the store's host) that aborts with "terminate called without an
    # active exception" after the work is done (pytorch/pytorch#190489, pytorch#179291) — torch's teardown,
    # not the overlay's: no overlay thread is alive by then (the lane is shut down above).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
