"""``plan --help``'s closing examples: one per axis a request can state (kept here, with no
imports, so that the command line loads it for free)."""

# ``--layout``'s and ``--moe-dispatcher``'s help lines (pipeline/__main__.py ``plan``)
LAYOUT_HELP = ("fix axes, any integers whose product with dp is N: tp=8, pp=12, cp=1, dp=.., "
               "ep=.., v=3 (interleaved chunks per stage), mb=6 (micro-batch, sequences), "
               "gbs=1536 (global batch, sequences), zero=0-3, shard=.. (HSDP sharding group), "
               "recompute=none|selective|full, sp=true|false, node=4 (accelerators per "
               "scale-up domain), flushes=2 (pipeline schedules per step); joined by commas, "
               "e.g. --layout tp=8,pp=12,mb=1,gbs=1536")
DISPATCHER_HELP = ("MoE token dispatcher: alltoall (default; one copy per routed expert), "
                   "deepep or hybridep (one copy per destination rank and node), e.g. "
                   "--moe-dispatcher deepep")

# One example per axis; tests/test_plan_help.py checks each axis is here and each example runs.
EXAMPLES = (
    ("chip counts", "scalewall plan llama-3-70b H100 --n 512 2048 8192"),
    ("layout keys (tp, pp, cp, dp, ep, v, mb, gbs, zero, shard, recompute, sp, node, flushes)",
     "scalewall plan gpt3-175b A100-SXM4-80GB --n 1536 --layout "
     "tp=8,pp=12,v=2,mb=1,gbs=1536,zero=1,recompute=selective,sp=true"),
    ("pipeline schedules per step (torchtitan, Automodel: one per gradient-accumulation step)",
     "scalewall plan llama-3-70b H100 --n 512 --framework fsdp --seq-len 8192 "
     "--global-batch-tokens 16777216 --layout tp=8,pp=4,mb=1,flushes=2"),
    ("ZeRO-3 / HSDP sharding group",
     "scalewall plan gpt3-175b A100-SXM4-80GB --n 768 --global-batch-tokens 3145728 "
     "--layout tp=1,pp=1,zero=3,shard=64"),
    ("long context: cp, dp, accelerators per node",
     "scalewall plan llama-3-70b H100 --n 512 --seq-len 32768 --global-batch-tokens 16777216 "
     "--layout tp=8,cp=4,dp=16,node=8"),
    ("batch and sequence length",
     "scalewall plan llama-3-70b H100 --n 512 --seq-len 8192 --global-batch-tokens 16777216"),
    ("precision", "scalewall plan llama-3-70b H100 --n 512 --precision fp8"),
    ("cluster (node, scale-up domain: NVLink or TPU ICI, scale-out)",
     "scalewall plan llama-3-70b GB200 --n 512 --cluster gb200-nvl72"),
    ("kernel facts", "scalewall plan llama-3-70b H100 --n 512 --no-tp-comm-overlap "
                     "--no-dp-comm-overlap --fused-attention"),
    ("framework family", "scalewall plan llama-3-70b H100 --n 512 --framework fsdp"),
    ("a model by shape", "scalewall plan mine H100 --n 64 --params-b 8 --layers 32 "
                         "--d-model 4096 --heads 32"),
    ("MoE flags", "scalewall plan mine H100 --n 64 --params-b 46.7 --layers 32 --d-model 4096 "
                  "--heads 32 --experts 8 --top-k 2 --expert-ffn 14336 --shared-experts 0 "
                  "--active-params-b 12.9 --layout ep=8"),
    ("MoE model by name", "scalewall plan deepseek-v3 H800 --n 2048 --precision fp8"),
    ("MoE token dispatcher (DeepEP: one copy per destination rank and node)",
     "scalewall plan deepseek-v3 H100 --n 256 --layout ep=64 --moe-dispatcher deepep"),
    ("training time and energy", "scalewall plan llama-3-70b H100 --n 2048 --train-tokens 15e12"),
)


def epilog() -> str:
    """The examples as help text: a title line and the command indented under it, each block
    marked ``\\b`` so that click prints it as written (its wrapping breaks a command at
    hyphens: ``--train-`` / ``tokens``)."""
    return "\n\n".join(["Examples, one per axis:"]
                       + [f"\b\n{what}:\n  {command}" for what, command in EXAMPLES])
