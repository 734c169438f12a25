"""Framework families: which software ran a job, by source or by its strategy text.

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
PRODUCTION_FAMILIES = ("megatron", "fsdp", "deepspeed")
FAMILIES = (*PRODUCTION_FAMILIES, PLAYBOOK)
# Source -> family, where the source says which software ran:
# - megatron2021: Megatron-LM (arXiv:2104.04473); nvidia_dgxc2024: NeMo (Megatron core);
# - bloom2022: Megatron-DeepSpeed with ZeRO-1 (arXiv:2211.05100);
# - llama3: Meta's 4D stack with FSDP data parallelism (arXiv:2407.21783 §3.3), the stack
#   torchtitan publishes (arXiv:2410.06511); torchtitan2024: torchtitan;
# - ultrascale_playbook2025: nanotron on the Playbook's cluster.
SOURCE_FAMILY = {"megatron2021": "megatron", "nvidia_dgxc2024": "megatron",
                 "bloom2022": "deepspeed", "llama3": "fsdp", "torchtitan2024": "fsdp",
                 "ultrascale_playbook2025": PLAYBOOK}
# Otherwise the strategy text names it (step logs, new tables); default megatron.
_STRATEGY_WORDS = ((re.compile(r"nanotron", re.I), PLAYBOOK),
                   (re.compile(r"deepspeed|\bzero-?[123]\b", re.I), "deepspeed"),
                   (re.compile(r"fsdp|torchtitan", re.I), "fsdp"),
                   (re.compile(r"megatron|nemo", re.I), "megatron"))
DEFAULT_FAMILY = "megatron"
_DEEPSPEED = re.compile(r"deepspeed", re.I)


def family_of(frame: pd.DataFrame) -> np.ndarray:
    """Per row: ``framework_family`` where given, else by source, else by strategy text."""
    n = len(frame)
    given = (frame["framework_family"].astype(object).to_numpy() if "framework_family" in frame
             else np.full(n, None, dtype=object))
    source = (frame["source"].astype(object).to_numpy() if "source" in frame
              else np.full(n, None, dtype=object))
    strategy = (frame["strategy"].astype(object).to_numpy() if "strategy" in frame
                else np.full(n, None, dtype=object))
    out = []
    for g, s, text in zip(given, source, strategy):
        text = text if isinstance(text, str) else ""
        if isinstance(g, str) and g in FAMILIES:
            out.append(g)
        elif _DEEPSPEED.search(text):
            # a source's DeepSpeed baselines ran DeepSpeed, whatever the source's own stack
            out.append("deepspeed")
        elif isinstance(s, str) and s in SOURCE_FAMILY:
            out.append(SOURCE_FAMILY[s])
        else:
            out.append(next((f for pat, f in _STRATEGY_WORDS if pat.search(text)),
                            DEFAULT_FAMILY))
    return np.array(out, dtype=object)
