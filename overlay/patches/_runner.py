"""Wrappers shared by the model-runner patches (vLLM V1 and vllm-ascend).

* ``execute_model``: marks the scope in which a forward pass is a real step
  (vLLM's dummy / graph-capture runs call the model outside it).
* ``profile_run``: vLLM's memory profiling holds the largest ``q``
  (``max_num_reqs`` x vocab) meanwhile — on a device, once per batch vLLM keeps
  in flight (:func:`q_copies`: two under async scheduling) — so the KV cache is
  sized with it (once: the outermost call, where a subclass's ``profile_run``
  calls its base; never on a pipeline rank that does not sample);
* ``_dummy_run`` / ``_dummy_sampler_run``: warm-up scope — sampler calls in it
  draw inline and are only counted (``unattributed`` in the summary); a
  forward in it opens no step, even inside ``execute_model`` (data parallel
  and external-launcher runs call ``_dummy_run`` from there).
* the forward seam — ``_model_forward`` (vLLM >= 0.11, vllm-ascend >= 0.15)
  or ``_generate_process_reqs_hidden_states`` (vllm-ascend 0.13 - 0.14):
  opens a step right before the forward (launching ``q``) and closes its
  window after; emits the ``expo_prof::forward`` span;
* the launch seam ``_prepare_inputs`` — only where no forward seam exists
  (vLLM 0.10): the batch is known when it returns, so ``q`` is launched then;
  the forward window stays open until the sampler takes ``q`` (it then also
  holds the logits computation).

Every wrapper calls the original exactly once, outside any ``try`` of ours:
vLLM's own exceptions pass through untouched, ours switch the overlay off.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from overlay import dispatch, guard
from overlay.contract import SPAN_FORWARD
from overlay.lanes import span
from overlay.sampler import Overlay, Step, active
from overlay.sourcecheck import FORWARD_SEAMS, LAUNCH_SEAM, PROFILE_METHOD, WARMUP_METHODS, pick_seam

# The names it hooks, and how the seam is picked, are shared with the source check at start
# (overlay/sourcecheck.py), so a release passes there exactly where these wrappers would hook it.
# PROFILE_METHOD: vLLM's memory profiling (``determine_available_memory`` calls it before sizing the KV cache).


def scope(original: Callable[..., Any], counter: str) -> Callable[..., Any]:
    """Wrap ``original`` so ``Overlay.<counter>`` is raised while it runs."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        ov = active()
        if ov is None:
            return original(self, *args, **kwargs)
        setattr(ov, counter, getattr(ov, counter) + 1)
        try:
            return original(self, *args, **kwargs)
        finally:
            setattr(ov, counter, getattr(ov, counter) - 1)

    return wrapper


def _capturing(device: Any) -> bool:
    """Whether a device graph is being captured (never launch into a graph)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return False
    check = getattr(torch.get_device_module(dev), "is_current_stream_capturing", None)
    return bool(check()) if check is not None else False


def _last_pp_rank() -> bool:
    try:
        from vllm.distributed.parallel_state import get_pp_group

        return bool(get_pp_group().is_last_rank)
    except Exception:  # noqa: BLE001 - not initialised: single process
        return True


def forward_tokens(args: tuple, kwargs: dict) -> int:
    """Tokens the forward computes (padded), read from the forward seam's arguments; 0 when unknown.

    vllm-ascend's ``_model_forward`` takes ``num_tokens_padded`` first; vLLM's
    takes ``input_ids`` / ``positions`` (``[n]``, or ``[3, n]`` with M-RoPE) /
    ``inputs_embeds`` (``[n, hidden]``).
    """
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        return args[0]
    for name, pos in (("input_ids", 0), ("positions", 1), ("inputs_embeds", 3)):
        shape = getattr(kwargs.get(name, args[pos] if len(args) > pos else None), "shape", None)
        if shape:
            return int(shape[-1] if name == "positions" else shape[0])
    return 0


def begin_for_runner(ov: Overlay, runner: Any, tokens: int = 0) -> Step | None:
    """Open a step for ``runner``'s next forward, sized from its input batch.

    Rows are ``input_batch.num_reqs``: vLLM's sampler draws noise for every
    request row of a non-greedy batch (greedy rows are overwritten after).
    ``tokens``: what the forward computes (:func:`forward_tokens`), the
    batch shape the switchback analysis compares steps by. Nothing is drawn
    for a batch vLLM's sampler will not take to ``random_sample``
    (:mod:`overlay.dispatch`), nor in a warm-up run.
    """
    import torch

    if ov.warmup_depth > 0:
        # A dummy run inside execute_model (data parallel, external launcher)
        # reaches the forward seam too: it samples nothing that is a step.
        return None
    if getattr(runner, "is_pooling_model", False) or not _last_pp_rank():
        return None
    device = runner.device
    if _capturing(device):
        return None
    try:
        batch = runner.input_batch
        rows = int(batch.num_reqs)
        metadata = batch.sampling_metadata
        all_greedy = bool(metadata.all_greedy)
        seeded_rows = len(metadata.generators)
        vocab = int(runner.model_config.get_vocab_size())
        fp64 = bool(getattr(runner.sampler, "use_fp64_gumbel", False))
        # FlashInfer samples top-k/top-p batches itself: draw only what vLLM's dispatch will use.
        skip = dispatch.skip_reason(runner.sampler, metadata)
    except AttributeError:
        # A runner shape this overlay does not know: record the forward, launch
        # nothing; the sampler then falls back with `no_pending`.
        return ov.begin_unsized_step(device)
    return ov.begin_step(
        rows=rows,
        vocab=vocab,
        dtype=torch.float64 if fp64 else torch.float32,
        device=device,
        all_greedy=all_greedy,
        seeded_rows=seeded_rows,
        tokens=tokens,
        skip=skip,
    )


def model_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a runner's forward seam (any signature)."""

    @functools.wraps(original)
    def _model_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        ov = active()
        if ov is None:
            return original(self, *args, **kwargs)
        outermost = ov.forward_depth == 0
        step = None
        if outermost and ov.execute_depth > 0:
            try:
                step = begin_for_runner(ov, self, forward_tokens(args, kwargs))
            except Exception as exc:  # noqa: BLE001
                guard.failed(exc)
                step = None
        ov.forward_depth += 1
        try:
            with span(SPAN_FORWARD):
                out = original(self, *args, **kwargs)
        finally:
            ov.forward_depth -= 1
        if step is not None:
            try:
                ov.end_forward(step)
            except Exception as exc:  # noqa: BLE001
                guard.failed(exc)
        return out

    return _model_forward


def launch_after(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``_prepare_inputs``: launch ``q`` once the batch is prepared (no forward seam)."""

    @functools.wraps(original)
    def _prepare_inputs(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        ov = active()
        if ov is not None and ov.execute_depth > 0 and ov.forward_depth == 0:
            try:
                step = begin_for_runner(ov, self)
                if step is not None:
                    step.forward_open = True
            except Exception as exc:  # noqa: BLE001
                guard.failed(exc)
        return out

    return _prepare_inputs


def q_size(runner: Any) -> tuple[int, int, Any]:
    """(rows, vocab, dtype) of the largest q: ``max_num_reqs`` rows of the vocabulary.

    Bytes = max_num_seqs x vocab x 4 (8 with fp64 gumbel): 623 MB at 1024 x 152k.
    """
    import torch

    fp64 = bool(getattr(getattr(runner, "sampler", None), "use_fp64_gumbel", False))
    rows = int(getattr(runner, "max_num_reqs", 0) or runner.scheduler_config.max_num_seqs)
    return rows, int(runner.model_config.get_vocab_size()), torch.float64 if fp64 else torch.float32


def q_copies(runner: Any) -> int:
    """How many q a device lane's allocator can hold at once: one per batch vLLM keeps in flight.

    vLLM 0.33 (``vllm/v1/engine/core.py``, ``step_with_batch_queue``) issues the
    next ``execute_model`` before it waits for the previous batch's output, up
    to ``vllm_config.max_concurrent_batches`` batches (2 under async
    scheduling, the pipeline size under PP, else 1). The model runner calls
    ``sample_tokens`` before the next ``execute_model`` (it raises otherwise),
    so the host has freed the previous q when the next is drawn — but the
    device may still be sampling with it, and the allocator keeps its block
    (``record_stream``) until it has: one block per batch in flight. (The CPU
    lane draws into one reused buffer and samples on the host: the caller
    reserves one there.)
    """
    config = getattr(runner, "vllm_config", None)
    batches = getattr(config, "max_concurrent_batches", None)
    if isinstance(batches, int) and not isinstance(batches, bool) and batches >= 1:
        return batches
    # A vLLM without the property: async scheduling keeps two batches in flight.
    scheduler = getattr(runner, "scheduler_config", None) or getattr(config, "scheduler_config", None)
    return 2 if getattr(scheduler, "async_scheduling", False) else 1


def reserve_during(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``profile_run``: hold the q a running server can hold at once while vLLM measures its peak memory.

    That is :func:`q_copies` q of the largest size, each its own block. Nothing
    on a pipeline rank other than the last: vLLM's ``profile_run`` runs its
    sampler only there, and the runner hook launches no q elsewhere.
    """

    @functools.wraps(original)
    def profile_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        ov = active()
        if ov is None:
            return original(self, *args, **kwargs)
        draws: list[Any] = []
        # Only the outermost profile_run holds q: vllm-ascend's NPU profile_run calls
        # super().profile_run(), and both are wrapped; two q would be held at once.
        if ov.profile_depth == 0 and not getattr(self, "is_pooling_model", False) and _last_pp_rank():
            try:
                rows, vocab, dtype = q_size(self)
                # A thread lane reuses one buffer; a stream lane allocates each q (one block per batch in flight).
                stream_lane = ov.lane_for(self.device).kind == "stream"
                for _ in range(q_copies(self) if stream_lane else 1):
                    draws.append(ov.reserve(rows, vocab, dtype, self.device))
            except Exception as exc:  # noqa: BLE001
                guard.failed(exc)
        ov.profile_depth += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            ov.profile_depth -= 1
            if draws and active() is ov:
                try:
                    for draw in draws:
                        ov.release(draw)
                except Exception as exc:  # noqa: BLE001
                    guard.failed(exc)

    return profile_run


def patch_runner_class(patcher: Any, cls: Any) -> str | None:
    """Apply the runner wrappers to the methods ``cls`` defines itself; returns the seam.

    Inherited methods are left alone: the base class's patch covers them, and
    patching them here too would double-count. Every forward seam ``cls``
    defines is wrapped (a subclass override that skips ``super()`` is still
    seen; nesting opens one step only).
    """
    if patcher.owns(cls, "execute_model"):
        patcher.set(cls, "execute_model", scope(cls.execute_model, "execute_depth"))
    for name in FORWARD_SEAMS:
        if patcher.owns(cls, name):
            patcher.set(cls, name, model_forward(getattr(cls, name)))
    seam = pick_seam(lambda n: n in vars(cls), lambda n: hasattr(cls, n))
    if seam == LAUNCH_SEAM and patcher.owns(cls, LAUNCH_SEAM):
        patcher.set(cls, LAUNCH_SEAM, launch_after(cls._prepare_inputs))
    for name in WARMUP_METHODS:
        if patcher.owns(cls, name):
            patcher.set(cls, name, scope(getattr(cls, name), "warmup_depth"))
    if patcher.owns(cls, PROFILE_METHOD):
        patcher.set(cls, PROFILE_METHOD, reserve_during(cls.profile_run))
    return seam


def no_seam_message(cls: type, version_hint: str) -> str:
    """The one line said at start when a runner class has no seam the overlay hooks."""
    return (
        f"{cls.__module__}.{cls.__qualname__} has none of "
        f"{', '.join(FORWARD_SEAMS + (LAUNCH_SEAM,))}, so q cannot be launched before the "
        f"forward pass; {version_hint}"
    )

