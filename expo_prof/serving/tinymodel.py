"""A tiny random-weight Llama, built fully offline, for the demo and the e2e tests.

No model can be downloaded on the machines this runs on, so the demo and the
end-to-end tests serve a model made here: a ``LlamaForCausalLM`` checkpoint in
Hugging Face layout (``config.json``, ``model.safetensors``, ``tokenizer.json``
…) that vLLM loads like any other. Weights come from numpy (never torch:
``expo_prof`` must import and run without it) and are saved with
``safetensors.numpy``; the tokenizer is a byte-level BPE trained with
``tokenizers`` on a small built-in corpus. The same arguments give the same
bytes, so a cached copy is reused and tests are repeatable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from expo_prof.errors import BadInput, ExpoProfError

#: Bumped whenever the produced files change for the same arguments, so an old
#: cache directory is never mistaken for a current one.
_FORMAT_VERSION = 1
#: Marker written last: a directory without it is an interrupted build.
_DONE_MARKER = ".expo-prof-tiny-llama.json"

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"

# Byte-level BPE needs some text to learn merges from; any English prose works.
# Kept inline so the model can be built with no file or network access.
_CORPUS = """\
The quick brown fox jumps over the lazy dog while the sampler draws noise.
A language model predicts the next token from the tokens before it.
Sampling picks a token at random in proportion to its probability, greedy
decoding always takes the most likely one. Temperature sharpens or flattens
the distribution; top-k keeps the k most likely tokens and top-p keeps the
smallest set whose probability reaches p.
The forward pass runs the transformer layers: attention, then the feed-forward
block, each followed by a residual connection and a normalisation.
Exponential noise does not depend on the logits, so it can be drawn on a side
stream or a spare core while the forward pass runs, and the sampler only waits
for it at the end.
Once upon a time there was a small model that knew only a few hundred words.
It liked numbers: one two three four five six seven eight nine ten eleven
twelve, and it liked colours: red orange yellow green blue indigo violet.
Every step of the engine schedules requests, prepares inputs, runs the model,
samples one token per request and sends the text back to the client.
"""


def _cache_root() -> Path:
    """Default cache directory: ``.cache/tiny-llama`` at the repository root."""
    return Path(__file__).resolve().parents[2] / ".cache" / "tiny-llama"


def _require(module: str, why: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ExpoProfError(
            f"building the tiny model needs the Python package {module.split('.')[0]!r} ({why}); "
            f"install it (it comes with vLLM, or `pip install {module.split('.')[0]}`)"
        ) from exc


def _train_tokenizer(vocab_size: int, max_position: int, dest: Path,
                     pad_vocab: int | None = None) -> tuple[int, int, int]:
    """Train a byte-level BPE on the built-in corpus (filled up to ``pad_vocab``); return (vocab size, bos id, eos id)."""
    tk = _require("tokenizers", "to train the tokenizer")
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tok = tk.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    if pad_vocab is not None and tok.get_vocab_size() < pad_vocab:
        tok.add_tokens([f"<v{i}>" for i in range(pad_vocab - tok.get_vocab_size())])
    bos_id, eos_id = tok.token_to_id(BOS_TOKEN), tok.token_to_id(EOS_TOKEN)
    # Prepend BOS like real Llama tokenizers; ByteLevel post-processing keeps offsets right.
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A {BOS_TOKEN} $B", special_tokens=[(BOS_TOKEN, bos_id)]
            ),
        ]
    )
    tok.save(str(dest / "tokenizer.json"))
    _write_json(
        dest / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": BOS_TOKEN,
            "eos_token": EOS_TOKEN,
            "pad_token": EOS_TOKEN,
            "model_max_length": max_position,
            "clean_up_tokenization_spaces": False,
            # A minimal template so /v1/chat/completions works too.
            "chat_template": (
                "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant: {% endif %}"
            ),
        },
    )
    _write_json(dest / "special_tokens_map.json", {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": EOS_TOKEN})
    return tok.get_vocab_size(), bos_id, eos_id


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _weights(
    rng: np.random.Generator, *, vocab: int, hidden: int, inter: int, layers: int, heads: int, head_dim: int
) -> dict[str, np.ndarray]:
    """Random Llama weights in Hugging Face names, float32.

    The LM head is scaled so logits have a standard deviation of a few units:
    with the usual 0.02 init every token would be almost equally likely, greedy
    argmax margins would be tiny and sampled text pure noise.
    """

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    w: dict[str, np.ndarray] = {"model.embed_tokens.weight": normal((vocab, hidden), 1.0)}
    qkv = heads * head_dim
    for i in range(layers):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = normal((qkv, hidden), 0.02)
        w[p + "self_attn.k_proj.weight"] = normal((qkv, hidden), 0.02)
        w[p + "self_attn.v_proj.weight"] = normal((qkv, hidden), 0.02)
        w[p + "self_attn.o_proj.weight"] = normal((hidden, qkv), 0.02)
        w[p + "mlp.gate_proj.weight"] = normal((inter, hidden), 0.02)
        w[p + "mlp.up_proj.weight"] = normal((inter, hidden), 0.02)
        w[p + "mlp.down_proj.weight"] = normal((hidden, inter), 0.02)
        w[p + "input_layernorm.weight"] = np.ones(hidden, dtype=np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(hidden, dtype=np.float32)
    w["model.norm.weight"] = np.ones(hidden, dtype=np.float32)
    w["lm_head.weight"] = normal((vocab, hidden), 2.5 / np.sqrt(hidden))
    return w


def _params_key(params: dict) -> str:
    blob = json.dumps({"format": _FORMAT_VERSION, **params}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def build_tiny_llama(
    dest: Path | None = None,
    *,
    seed: int = 0,
    vocab_size: int = 1024,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 2,
    max_position: int = 256,
    pad_vocab: int | None = None,
) -> Path:
    """Build (or reuse) a random-weight ``LlamaForCausalLM`` and return its directory.

    ``dest`` is a cache root (default ``.cache/tiny-llama/`` in the repository);
    the model lands in a subdirectory named after a hash of the arguments, so
    different arguments never collide and the same ones are built once. The
    build goes to a temporary sibling directory renamed into place, so a
    concurrent or interrupted build never leaves a half-written model.
    ``vocab_size`` is the BPE target; the real size (the corpus may not fill it)
    is written to ``config.json``. ``hidden // heads`` must be 32, 64, 128 or
    256: vLLM's CPU attention kernel rejects other head sizes.
    ``pad_vocab``: fill the vocabulary up to this size with filler tokens
    (``<v123>``, each decodable), for a large-vocabulary stand-in (real LLMs
    sample over 32k–152k tokens; the drawn noise is ``rows × vocab``).
    """
    if heads <= 0 or hidden <= 0 or layers <= 0 or hidden % heads:
        raise BadInput(f"tiny model: hidden ({hidden}) must be a positive multiple of heads ({heads})")
    head_dim = hidden // heads
    if head_dim not in (32, 64, 80, 96, 112, 128, 256):
        raise BadInput(f"tiny model: head_dim = hidden/heads = {head_dim}; vLLM's CPU attention needs 32, 64, 128 or 256")
    if vocab_size < 300:
        raise BadInput(f"tiny model: vocab_size {vocab_size} is below the 256 byte tokens + specials a byte-level BPE needs")
    if pad_vocab is not None and pad_vocab < vocab_size:
        raise BadInput(f"tiny model: pad_vocab {pad_vocab} is below vocab_size {vocab_size}")
    params = dict(
        seed=seed, vocab_size=vocab_size, hidden=hidden, layers=layers, heads=heads, max_position=max_position
    )
    if pad_vocab is not None:  # only then: the cache keys of unpadded models stay as they were
        params["pad_vocab"] = pad_vocab
    root = Path(dest) if dest is not None else _cache_root()
    out = root / f"llama-h{hidden}-l{layers}-{_params_key(params)}"
    if (out / _DONE_MARKER).is_file():
        return out

    st_numpy = _require("safetensors.numpy", "to write the weights")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        vocab, bos_id, eos_id = _train_tokenizer(vocab_size, max_position, tmp, pad_vocab)
        inter = 2 * hidden
        rng = np.random.default_rng(seed)
        weights = _weights(rng, vocab=vocab, hidden=hidden, inter=inter, layers=layers, heads=heads, head_dim=head_dim)
        st_numpy.save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _write_json(
            tmp / "config.json",
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "vocab_size": vocab,
                "hidden_size": hidden,
                "intermediate_size": inter,
                "num_hidden_layers": layers,
                "num_attention_heads": heads,
                "num_key_value_heads": heads,
                "head_dim": head_dim,
                "hidden_act": "silu",
                "max_position_embeddings": max_position,
                "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0,
                "attention_bias": False,
                "mlp_bias": False,
                "tie_word_embeddings": False,
                "torch_dtype": "float32",
                "bos_token_id": bos_id,
                "eos_token_id": eos_id,
            },
        )
        _write_json(tmp / "generation_config.json", {"bos_token_id": bos_id, "eos_token_id": eos_id})
        _write_json(tmp / _DONE_MARKER, {"format": _FORMAT_VERSION, **params, "vocab": vocab})
        # mkdtemp makes 0700 and safetensors writes 0600: make the model readable like any checkout file.
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, out)
        except OSError:
            # Another process finished the same build first: theirs is identical.
            if not (out / _DONE_MARKER).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
