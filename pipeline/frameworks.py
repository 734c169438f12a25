"""Framework families: which software ran a job, from what its row states (its ``framework``,
its strategy text), else by source.

A family is the software that ran the job. The calibrate stage shares its fitted step-time
parameters within a family (pipeline/calibrate/families.py); the theory stage's memory model
gives each family its own activation factor (pipeline/theory/memory_fit.py), because what a
framework keeps per stored activation depends on its kernels. Kept here, below the stages
(the import contracts let no stage import calibrate), so both read one mapping.

The Ultra-Scale Playbook sweep is its own family: one team's nanotron runs on one cluster.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

PLAYBOOK = "playbook"
# Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, the fork BLOOM, MT-NLG and vTrain ran):
# Megatron-LM's model code and tensor parallelism on DeepSpeed's engine, its pipeline schedule
# and its ZeRO-1; a stack of its own, not DeepSpeed's ZeRO-3 data parallelism.
MEGATRON_DEEPSPEED = "megatron_deepspeed"
PRODUCTION_FAMILIES = ("megatron", "fsdp", "deepspeed", MEGATRON_DEEPSPEED)
FAMILIES = (*PRODUCTION_FAMILIES, PLAYBOOK)
# Source -> family, where the source says which software ran:
# - megatron2021: Megatron-LM (arXiv:2104.04473); nvidia_dgxc2024: NeMo (Megatron core);
# - bloom2022: Megatron-DeepSpeed with ZeRO-1 (arXiv:2211.05100 §3.4);
# - llama3: Meta's 4D stack with FSDP data parallelism (arXiv:2407.21783 §3.3), the stack
#   torchtitan publishes (arXiv:2410.06511); torchtitan2024: torchtitan;
# - ultrascale_playbook2025: nanotron on the Playbook's cluster.
SOURCE_FAMILY = {"megatron2021": "megatron", "nvidia_dgxc2024": "megatron",
                 "bloom2022": MEGATRON_DEEPSPEED, "llama3": "fsdp", "torchtitan2024": "fsdp",
                 "ultrascale_playbook2025": PLAYBOOK}
# A row's ``framework`` text (published tables, MLPerf system descriptions, step-log formats)
# comes before this mapping; the strategy text after it; default megatron.
_MEGATRON_DEEPSPEED = re.compile(r"megatron[-_ ]?deepspeed", re.I)
_STRATEGY_WORDS = ((re.compile(r"nanotron", re.I), PLAYBOOK),
                   (_MEGATRON_DEEPSPEED, MEGATRON_DEEPSPEED),
                   (re.compile(r"deepspeed|\bzero-?[123]\b", re.I), "deepspeed"),
                   (re.compile(r"fsdp|torchtitan", re.I), "fsdp"),
                   (re.compile(r"megatron|nemo", re.I), "megatron"))
DEFAULT_FAMILY = "megatron"
_DEEPSPEED = re.compile(r"deepspeed", re.I)


def family_of(frame: pd.DataFrame) -> np.ndarray:
    """Per row, the first that applies: ``framework_family`` where given; Megatron-DeepSpeed
    named in the strategy text or the ``framework``; DeepSpeed named in the strategy text; the
    ``framework`` the source names (the same words as the strategy
    text's); the source's family (``SOURCE_FAMILY``); the strategy text; ``DEFAULT_FAMILY``.

    So a new source of nanotron or torchtitan runs gets its family from its ``framework``
    column, whatever its id."""
    n = len(frame)

    def text_column(name: str) -> np.ndarray:
        return (frame[name].astype(object).to_numpy() if name in frame
                else np.full(n, None, dtype=object))

    given, source, strategy, framework = (text_column(c) for c in (
        "framework_family", "source", "strategy", "framework"))
    # one answer per distinct (family, source, strategy, framework): a planner's search asks
    # for tens of thousands of rows with one or two distinct keys
    codes, distinct = [], []
    key = np.zeros(n, dtype=np.int64)
    for column in (given, source, strategy, framework):
        c, u = pd.factorize(column)  # missing values: code -1
        codes.append(c)
        distinct.append([k if isinstance(k, str) else None for k in u] + [None])
        # the row's key so far, renumbered densely (stays below n x distinct values)
        key = pd.factorize(key * (len(u) + 1) + (c + 1))[0]
    first = np.full(int(key.max()) + 1 if n else 0, -1, dtype=np.int64)
    first[key[::-1]] = np.arange(n - 1, -1, -1)  # each key's first row
    answers = np.array([_family_one(*(d[c[i]] for d, c in zip(distinct, codes))) for i in first],
                       dtype=object)
    return answers[key] if n else np.array([], dtype=object)


def _family_one(g: str | None, s: str | None, text: str | None, stack: str | None) -> str:
    """:func:`family_of`'s rule for one row."""
    text = text or ""
    named = next((f for pat, f in _STRATEGY_WORDS if pat.search(stack or "")), None)
    if g in FAMILIES:
        return g
    if _MEGATRON_DEEPSPEED.search(text) or named == MEGATRON_DEEPSPEED:
        # its strategy texts name DeepSpeed for the engine (MT-NLG: "Megatron TP8 + DeepSpeed
        # PP35"), not for ZeRO-3 baselines
        return MEGATRON_DEEPSPEED
    if _DEEPSPEED.search(text):
        # a source's DeepSpeed baselines ran DeepSpeed, whatever the source's own stack
        return "deepspeed"
    if named is not None:
        return named
    if s in SOURCE_FAMILY:
        return SOURCE_FAMILY[s]
    return next((f for pat, f in _STRATEGY_WORDS if pat.search(text)), DEFAULT_FAMILY)
