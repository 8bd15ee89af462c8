"""The fixed request set ``expo-prof verify`` sends to each server (overlay off, overlay on).

Every knob of the request budget lives here, so the CLI, the JSON result and
the tests name them alike. The defaults finish in a few minutes on the tiny
CPU model (README: "Verify the outputs").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DEFAULT_PROMPTS = (
    "The quick brown fox",
    "Sampling picks a token",
    "Once upon a time",
    "The forward pass runs",
)


@dataclass(frozen=True)
class SamplingConfig:
    """One sampling setting whose token distribution is compared off vs on."""

    name: str
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None

    def params(self) -> dict:
        """The request fields of this setting (unset ones left out: vLLM's defaults)."""
        p: dict = {"temperature": self.temperature}
        if self.top_k is not None:
            p["top_k"] = self.top_k
        if self.top_p is not None:
            p["top_p"] = self.top_p
        if self.min_p is not None:
            p["min_p"] = self.min_p
        return p

    @property
    def constrained(self) -> bool:
        return self.top_k is not None or self.top_p is not None or self.min_p is not None


DEFAULT_CONFIGS = (
    SamplingConfig("T=1"),
    SamplingConfig("top-k 5", top_k=5),
    SamplingConfig("top-p 0.8", top_p=0.8),
    SamplingConfig("min-p 0.1", min_p=0.1),
    SamplingConfig("top-k 20, top-p 0.9, min-p 0.05", top_k=20, top_p=0.9, min_p=0.05),
)


@dataclass(frozen=True)
class VerifySpec:
    """What to send to each side, and how sure the verdict must be."""

    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    #: Tokens per greedy and seeded request (ignore_eos: exactly this many).
    greedy_tokens: int = 16
    seed: int = 1234
    #: Samples per sampling setting and side (the distribution tests' size).
    samples: int = 2000
    #: First positions whose distributions are tested.
    positions: int = 2
    #: Samples per request (the OpenAI ``n``): vLLM samples them as rows of one batch.
    per_request: int = 50
    configs: tuple[SamplingConfig, ...] = DEFAULT_CONFIGS
    #: Requests in flight at once.
    concurrency: int = 4
    #: Family-wise level of the distribution tests (Bonferroni over every test).
    alpha: float = 0.05
    #: Power at which the detectable total variation is stated.
    power: float = 0.8
    timeout_s: float = 300.0
    vocab_size: int | None = None
    configs_note: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("configs_note")
        d["prompts"] = list(self.prompts)
        d["configs"] = [asdict(c) for c in self.configs]
        return d
