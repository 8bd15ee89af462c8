"""The offline tiny Llama: deterministic, loadable, cached (no server needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from expo_prof.errors import BadInput
from expo_prof.serving.tinymodel import BOS_TOKEN, EOS_TOKEN, build_tiny_llama


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_same_seed_gives_the_same_bytes(tmp_path, tiny_model):
    """GIVEN the session's tiny model (seed 0) WHEN built again from scratch
    into another directory THEN every file is byte-identical."""
    again = build_tiny_llama(tmp_path / "again")
    assert again.name == tiny_model.name
    assert _files(again) == _files(tiny_model)


def test_other_seed_changes_weights_not_tokenizer(tmp_path, tiny_model):
    """GIVEN seed 1 WHEN built THEN it lands in another directory, with other
    weights but the same tokenizer."""
    other = build_tiny_llama(tmp_path, seed=1)
    assert other.name != tiny_model.name
    assert (other / "model.safetensors").read_bytes() != (tiny_model / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (tiny_model / "tokenizer.json").read_bytes()


def test_config_weights_and_tokenizer_agree(tiny_model):
    """GIVEN the built model THEN config, weights and tokenizer describe one
    Llama: head_dim 64 (the CPU attention kernel's sizes), vocab = tokenizer
    size = embedding rows, float32 weights, BOS/EOS ids right."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    cfg = json.loads((tiny_model / "config.json").read_text())
    tok = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    w = load_file(str(tiny_model / "model.safetensors"))
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["head_dim"] == cfg["hidden_size"] // cfg["num_attention_heads"] == 64
    assert cfg["vocab_size"] == tok.get_vocab_size() == w["model.embed_tokens.weight"].shape[0] == w["lm_head.weight"].shape[0]
    assert all(a.dtype == np.float32 for a in w.values())
    assert len([k for k in w if k.endswith("q_proj.weight")]) == cfg["num_hidden_layers"]
    assert tok.token_to_id(BOS_TOKEN) == cfg["bos_token_id"] and tok.token_to_id(EOS_TOKEN) == cfg["eos_token_id"]
    enc = tok.encode("Sampling picks a token")
    assert enc.ids[0] == cfg["bos_token_id"]
    assert tok.decode(enc.ids) == "Sampling picks a token"


def test_cached_model_is_reused(tiny_model):
    """GIVEN a finished build WHEN asked again with the same arguments THEN the
    same directory comes back untouched (no rebuild)."""
    before = {p.name: p.stat().st_mtime_ns for p in tiny_model.iterdir()}
    assert build_tiny_llama(tiny_model.parent) == tiny_model
    assert {p.name: p.stat().st_mtime_ns for p in tiny_model.iterdir()} == before


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(hidden=64, heads=4), "head_dim"),  # head_dim 16: rejected by CPU attention
        (dict(hidden=100, heads=3), "multiple"),
        (dict(vocab_size=100), "vocab_size"),
    ],
)
def test_bad_shapes_are_refused_with_a_clear_error(tmp_path, kwargs, words):
    """GIVEN a shape vLLM's CPU backend cannot run WHEN building THEN one BadInput naming it."""
    with pytest.raises(BadInput, match=words):
        build_tiny_llama(tmp_path, **kwargs)
    assert not any(tmp_path.rglob("model.safetensors"))
