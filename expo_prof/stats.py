"""Statistics for a handful of noisy benchmark runs per side (numpy and math only).

* Student t distribution: CDF from the regularised incomplete beta function
  (:func:`expo_prof.special.betainc`), quantiles by safeguarded
  Newton iteration. Accurate to ~1e-12, fractional degrees of freedom allowed
  (Welch). scipy is *not* a run-time dependency; the tests check these
  functions against it.
* Paired t on the per-pair differences and Welch's unequal-variance t, each
  with the confidence interval of the mean difference.
* Permutation tests of the mean difference: exact sign flips of the pair
  differences (paired), exact re-splits of the pooled runs (unpaired); Monte
  Carlo with a fixed seed above :data:`EXACT_LIMIT` arrangements (at most
  :data:`MC_WORK` resampled values in all, drawn :data:`MC_CHUNK` at a time:
  bounded time and memory for any number of runs). Two-sided p
  is ``2 · min(P(T ≤ t_obs), P(T ≥ t_obs))`` clipped to 1, the definition
  scipy.stats.permutation_test uses.
* Runs needed: the smallest equal number of runs per side (pairs) for which a
  two-sided t-test at ``alpha`` reaches ``power`` if the observed effect and
  spread are the truth (shifted-central-t approximation of the noncentral t).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from expo_prof.special import betainc

#: Up to this many arrangements a permutation test enumerates them all.
EXACT_LIMIT = 65_536
#: Monte Carlo resamples beyond EXACT_LIMIT (seeded: the same data give the same p).
MC_RESAMPLES = 20_000
MC_SEED = 20251127
#: Work bound of a Monte Carlo test (resamples × runs): beyond ``MC_WORK / MC_RESAMPLES`` runs (500) the resamples
#: shrink so that a test of a million runs takes a second, not hours (its smallest p grows with it: past
#: ``2 · MC_WORK / alpha`` runs it cannot reach alpha, and the t-test decides, as with too few runs).
MC_WORK = 10_000_000
#: Rows of resamples drawn at once: memory stays about ``MC_CHUNK`` doubles whatever the run count.
MC_CHUNK = 2_000_000
#: Relative tolerance for ties with the observed statistic (as scipy: 100 ulp).
_TIE_EPS = np.finfo(float).eps * 100


# --------------------------------------------------------------------------- t distribution


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) (by symmetry, so small lower tails keep their precision)."""
    return t_sf(-t, df)


def _t_pdf(t: float, df: float) -> float:
    lc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(lc - (df + 1) / 2 * math.log1p(t * t / df))


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (0 < q < 1)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} outside (0, 1)")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    target = 1.0 - q  # upper tail, small: solve t_sf(t) = target for t > 0
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    t = (lo + hi) / 2
    for _ in range(200):
        f = t_sf(t, df) - target
        if f > 0:
            lo = t
        else:
            hi = t
        step = f / _t_pdf(t, df)  # d sf/dt = -pdf, so Newton: t + f/pdf
        nt = t + step
        if not lo < nt < hi:
            nt = (lo + hi) / 2
        if abs(nt - t) <= 1e-14 * max(1.0, abs(t)):
            return nt
        t = nt
    return t


# --------------------------------------------------------------------------- t-tests


@dataclass(frozen=True)
class TTest:
    """A t-test of the mean difference (B − A) and its confidence interval."""

    name: str  # "paired t" | "Welch t"
    diff: float  # estimated mean difference B − A
    se: float
    statistic: float
    df: float
    p: float
    ci_low: float
    ci_high: float
    confidence: float


def _t_from(name: str, diff: float, se: float, df: float, confidence: float) -> TTest:
    if se == 0.0 or not math.isfinite(se):
        # Zero spread: the test degenerates. Every run agreed exactly.
        if diff == 0.0:
            return TTest(name, 0.0, 0.0, 0.0, df, 1.0, 0.0, 0.0, confidence)
        return TTest(name, diff, 0.0, math.copysign(math.inf, diff), df, 0.0, diff, diff, confidence)
    t = diff / se
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    half = t_ppf(0.5 + confidence / 2.0, df) * se
    return TTest(name, diff, se, t, df, p, diff - half, diff + half, confidence)


def paired_t(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> TTest:
    """Paired t-test on ``b - a`` (needs at least 2 pairs)."""
    d = np.asarray(b, float) - np.asarray(a, float)
    n = len(d)
    if n < 2:
        raise ValueError("a paired t-test needs at least 2 pairs")
    se = float(np.std(d, ddof=1)) / math.sqrt(n)
    return _t_from("paired t", float(d.mean()), se, n - 1.0, confidence)


def welch_t(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> TTest:
    """Welch's unequal-variance t-test of mean(b) − mean(a) (needs 2+ runs per side)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise ValueError("Welch's t-test needs at least 2 runs per side")
    va, vb = float(np.var(a, ddof=1)) / na, float(np.var(b, ddof=1)) / nb
    se = math.sqrt(va + vb)
    if se == 0.0:
        df = float(na + nb - 2)
    else:
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return _t_from("Welch t", float(b.mean() - a.mean()), se, df, confidence)


# --------------------------------------------------------------------------- permutation tests


@dataclass(frozen=True)
class PermTest:
    """A permutation test of the mean difference (B − A)."""

    name: str  # "sign-flip permutation" | "permutation"
    statistic: float
    p: float
    exact: bool
    arrangements: int  # enumerated (exact) or resampled (Monte Carlo)
    #: The smallest p this test can give with these run counts: above alpha it cannot find anything.
    min_p: float


def _two_sided(null: np.ndarray, obs: float, adjust: int) -> float:
    gamma = abs(_TIE_EPS * obs)
    n = len(null)
    less = (np.count_nonzero(null <= obs + gamma) + adjust) / (n + adjust)
    greater = (np.count_nonzero(null >= obs - gamma) + adjust) / (n + adjust)
    return float(min(1.0, 2.0 * min(less, greater)))


def sign_flip_test(a: np.ndarray, b: np.ndarray) -> PermTest:
    """Paired permutation test: under H0 each pair's difference is as likely negated."""
    d = np.asarray(b, float) - np.asarray(a, float)
    n = len(d)
    if n < 1:
        raise ValueError("no pairs")
    obs = float(d.mean())
    if 2**n <= EXACT_LIMIT:
        idx = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((idx >> np.arange(n)) & 1)
        null = (signs * d).mean(axis=1)
        return PermTest("sign-flip permutation", obs, _two_sided(null, obs, 0), True, 2**n, min(1.0, 2.0 / 2**n))
    rng = np.random.default_rng(MC_SEED)
    k = mc_resamples(n)
    null = np.concatenate([(rng.choice(np.array([-1.0, 1.0]), size=(rows, n)) * d).mean(axis=1)
                           for rows in _chunks(k, n)])
    return PermTest("sign-flip permutation", obs, _two_sided(null, obs, 1), False, k, 2.0 / (k + 1))


def _comb_up_to(n: int, k: int, limit: int) -> int | None:
    """``math.comb(n, k)`` when it is at most ``limit``, else None — without the huge number (C(2·10⁶, 10⁶)
    has 600,000 digits)."""
    k = min(k, n - k)
    c = 1
    for i in range(k):
        c = c * (n - i) // (i + 1)
        if c > limit:
            return None
    return c


def mc_resamples(n: int) -> int:
    """Monte Carlo resamples of a test of ``n`` values: :data:`MC_RESAMPLES`, fewer past :data:`MC_WORK`."""
    return max(1, min(MC_RESAMPLES, MC_WORK // max(n, 1)))


def _chunks(k: int, n: int) -> list[int]:
    """``k`` resamples of ``n`` values in row counts of about :data:`MC_CHUNK` values each (the random stream is
    the same as one draw of all ``k`` rows)."""
    step = max(1, MC_CHUNK // max(n, 1))
    return [min(step, k - i) for i in range(0, k, step)]


def permutation_test(a: np.ndarray, b: np.ndarray) -> PermTest:
    """Unpaired permutation test: under H0 the runs' labels are exchangeable."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    na, nb = len(a), len(b)
    pooled = np.concatenate([a, b])
    n = na + nb
    obs = float(b.mean() - a.mean())
    total = pooled.sum()
    count = _comb_up_to(n, nb, EXACT_LIMIT)
    if count is not None:
        combos = np.array(list(itertools.combinations(range(n), nb)), dtype=np.int64)
        sum_b = pooled[combos].sum(axis=1)
        null = sum_b / nb - (total - sum_b) / na
        return PermTest("permutation", obs, _two_sided(null, obs, 0), True, count, min(1.0, 2.0 / count))
    rng = np.random.default_rng(MC_SEED)
    k = mc_resamples(n)
    parts = []
    for rows in _chunks(k, n):
        perms = rng.permuted(np.tile(pooled, (rows, 1)), axis=1)
        parts.append(perms[:, na:].mean(axis=1) - perms[:, :na].mean(axis=1))
    null = np.concatenate(parts)
    return PermTest("permutation", obs, _two_sided(null, obs, 1), False, k, 2.0 / (k + 1))


def significant(t: TTest, perm: PermTest, alpha: float) -> tuple[bool, bool]:
    """Whether the difference is significant at ``alpha``, and whether the permutation test vetoed it.

    Significant when the t-test's p < alpha and the permutation test does not
    contradict it. The permutation test can only contradict when it could
    itself reach p < alpha: with ``min_p == alpha`` (e.g. 5 pairs at alpha
    0.0625) it never can, and the t-test decides.
    """
    if t.p < alpha and perm.min_p < alpha and perm.p >= alpha:
        return False, True
    return t.p < alpha, False


# --------------------------------------------------------------------------- runs needed

#: Above this many runs per side the answer is "more than MAX_RUNS".
MAX_RUNS = 1000


def _power(delta: float, se: float, df: float, alpha: float) -> float:
    crit = t_ppf(1.0 - alpha / 2.0, df)
    return t_sf(crit - abs(delta) / se, df)


def _smallest_n(power_at, power: float) -> int | None:
    if power_at(MAX_RUNS) < power:
        return None
    lo, hi = 2, 2
    while power_at(hi) < power:
        lo, hi = hi, hi * 2
        hi = min(hi, MAX_RUNS)
    while lo < hi:
        mid = (lo + hi) // 2
        if power_at(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo


def runs_needed_paired(mean_diff: float, sd_diff: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Pairs needed for a paired t-test to detect ``mean_diff`` with ``power``; None: more than MAX_RUNS.

    ``mean_diff == 0`` (nothing to detect) also gives None.
    """
    if mean_diff == 0.0 or not math.isfinite(sd_diff):
        return None
    if sd_diff == 0.0:
        return 2
    return _smallest_n(lambda n: _power(mean_diff, sd_diff / math.sqrt(n), n - 1.0, alpha), power)


def runs_needed_unpaired(
    mean_diff: float, var_a: float, var_b: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """Runs per side needed for Welch's test to detect ``mean_diff``; None: more than MAX_RUNS (or no effect)."""
    if mean_diff == 0.0:
        return None
    v = var_a + var_b
    if v == 0.0:
        return 2

    def at(n: int) -> float:
        df = (n - 1.0) * v**2 / (var_a**2 + var_b**2)
        return _power(mean_diff, math.sqrt(v / n), df, alpha)

    return _smallest_n(at, power)


# --------------------------------------------------------------------------- robust spread


def mad(x: np.ndarray) -> float:
    """Median absolute deviation from the median (unscaled)."""
    x = np.asarray(x, float)
    return float(np.median(np.abs(x - np.median(x)))) if len(x) else math.nan


def modified_z(x: np.ndarray, ref: np.ndarray | None = None) -> np.ndarray:
    """Iglewicz–Hoaglin modified z-scores ``0.6745·(x − median)/MAD`` against ``ref`` (default ``x``).

    When MAD is 0 (half the runs identical) the mean absolute deviation
    (scaled by 1.2533/0.6745 as for a normal sample) stands in; when that is 0
    too, every differing value gets ±inf.
    """
    x = np.asarray(x, float)
    ref = x if ref is None else np.asarray(ref, float)
    med = float(np.median(ref))
    m = mad(ref)
    if m > 0:
        return 0.6745 * (x - med) / m
    meanad = float(np.mean(np.abs(ref - med)))
    if meanad > 0:
        return (x - med) / (1.2533 * meanad)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == med, 0.0, np.sign(x - med) * np.inf)
