"""The Model Runner V2 notice names the device the runner was built for (overlay/patches/not_applicable.py).

vLLM's V2 ``GPUModelRunner.__init__(self, vllm_config, device)``: positionally the device comes
second. The constructor's signature is taken from the real vLLM 0.33.0 wheel (the one member,
fetched by range as tools/overlay_matrix.py does), its body left out: building the
real runner needs a GPU.
"""

from __future__ import annotations

import ast
import sys
import types

import pytest
import torch

from eventlog_schema import read_log
from overlay import plugin
from overlay.events import EventLog
from overlay.patches import not_applicable
from shared_paths import REPO

sys.path.insert(0, str(REPO / "tools"))
import overlay_matrix  # noqa: E402

V2_MODULE = "vllm.v1.worker.gpu.model_runner"


@pytest.fixture(scope="module")
def v2_init_033(pypi_wheels):
    """A constructor with exactly the parameters of vLLM 0.33.0's V2 GPUModelRunner.__init__ (annotations dropped)."""
    with pypi_wheels("vllm", "0.33.0") as z:
        src = z.read("vllm/v1/worker/gpu/model_runner.py").decode()
    init = overlay_matrix.class_methods(src, "GPUModelRunner")["__init__"]
    args = init.args
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        a.annotation = None
    fn = ast.FunctionDef(name="__init__", args=args, body=[ast.Pass()], decorator_list=[], returns=None,
                         type_params=[])
    ns: dict = {}
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), "vllm-0.33.0", "exec"), ns)
    assert [a.arg for a in args.args] == ["self", "vllm_config", "device"]  # the shape this test is about
    return ns["__init__"]


class FakeVllmConfig:
    """Stands in for VllmConfig: only its str() matters (what the old code took for the device)."""

    def __str__(self) -> str:
        return "model='Qwen/Qwen3-32B': tensor_parallel_size=8"


@pytest.mark.parametrize(
    ("call", "backend"),
    [
        (lambda cls: cls(FakeVllmConfig(), torch.device("cuda", 1)), "cuda"),
        (lambda cls: cls(FakeVllmConfig(), device="xpu:0"), "xpu"),
        (lambda cls: cls(vllm_config=FakeVllmConfig(), device=torch.device("cpu")), "cpu"),
    ],
    ids=["positional", "keyword-string", "all-keywords"],
)
def test_v2_notice_names_the_device_argument(tmp_path, v2_init_033, warnings_of_overlay, call, backend):
    # GIVEN the overlay on and a V2 runner class with the real 0.33.0 constructor signature
    module = types.ModuleType(V2_MODULE)
    module.GPUModelRunner = type("GPUModelRunner", (), {"__init__": v2_init_033})
    plugin.enable(log=EventLog(str(tmp_path)), patches=())
    not_applicable.apply(module)
    try:
        # WHEN vLLM builds it (config first, then the device)
        call(module.GPUModelRunner)
    finally:
        not_applicable.remove()
    # THEN the log header's backend is the device's type, never the start of str(VllmConfig)
    _, lines = read_log(tmp_path)
    assert lines["header"][0]["backend"] == backend
    assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
