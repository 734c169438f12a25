"""One-off extractor: the layouts of MLPerf Training LLM submissions, from the submissions' own
configuration files -> ``data/raw/mlperf_configs/layouts.csv``.

Not part of the pipeline (nothing under ``pipeline/`` imports it; the CSV it writes is the
shipped data, and ``scripts/transcribe_reference.py`` joins it to the MLPerf runs). Re-run it by
hand with local mirrors (bare git directories) of ``github.com/mlcommons/training_results_vX.Y``::

    .venv/bin/python scripts/extract_mlperf_configs.py \\
        --repo v3.1=/path/training_results_v3.1.git ... [--out data/raw/mlperf_configs/layouts.csv]

What it reads (each row's ``config_path``, ``files_read`` and ``commit`` name the files):

* NVIDIA's recipe (NeMo/Megatron, used by NVIDIA and by the partners that submitted it): each
  submission's ``<submitter>/benchmarks/<benchmark>/implementations/<impl>/config_<SYSTEM>_
  <NODES>x<GPUS>x<MINIBS>...sh`` exports ``TENSOR_MODEL_PARALLEL``, ``PIPELINE_MODEL_PARALLEL``,
  ``INTERLEAVED_PIPELINE``, ``CONTEXT_PARALLEL``, ``MICRO_BATCH_SIZE``, ``MINIBS``, ``DGXNNODES``,
  ``DGXNGPU``, ``FP8``/``FP4``, and sources ``config_common*.sh`` files in order; the Hydra
  configuration ``conf/*.yaml`` reads them as ``${oc.env:NAME,default}``, whose default applies
  where no script sets the variable (e.g. ``virtual_pipeline_model_parallel_size:
  ${oc.decode:${oc.env:INTERLEAVED_PIPELINE,12}}``).
* The scripts are read, never run (they also create directories and call ``jq``): a small reader
  follows ``source``, ``export NAME=value``, ``: "${NAME:=value}"``, ``${NAME:=value}`` and
  ``unset`` in file order; every ``if`` condition is taken as false (the ``else`` branch is
  read). In these files every condition tests a variable the launcher leaves unset
  (``LOAD_MINIMAL_NUM_SAMPLES``, ``NO_CKPT``, ``MLPERF_VERSION == v31``, mount options) or
  guards an ``exit``; so false is what a plain launch evaluates.
* Which configuration a system ran: the ``README-<system>.md`` of its implementation folder where
  it names one (``source config_...sh``; NVIDIA from v5.0 on), else the one configuration of the
  folder whose ``DGXNNODES x DGXNGPU`` is the system's accelerator count (v3.1, v4.0 shared
  folders); a system that matches no configuration, or several, gets no row.
* A sourced file missing from the configuration's folder is read from the one other
  implementation folder of the same submission and benchmark that holds it (all its copies
  identical; ``files_read`` then names that folder): University-of-Florida's ``hpg.dgxb200x8``
  folders ship only their configurations, its ``b200_nemo`` folders the common files. One the
  submission lacks everywhere is listed as ``absent:<name>`` (v4.1 b200_n8_preview sources a
  ``config_common_blackwell.sh`` it does not ship; its layout and FP8 variables are all set in
  the configuration itself or in ``config_fp8.sh``). ``precision`` is left empty where an absent
  file comes after the last FP8/FP4 setting read, since it might change it, unless a later line
  turns on FP8 weights (``FP8_PARAM_GATHER=True``/``FP8_PARAMS=True``: Transformer Engine's
  FP8 parameters exist only under FP8 compute); ``precision`` is then ``fp8`` and listed in
  ``derived`` (NVIDIA v5.0 GB200 405B: ``FP8=True`` in config_common.sh, the absent
  config_common_blackwell.sh, then ``FP8_PARAM_GATHER=True``).
* Check (a row that fails it is left out): the result log's ``gradient_accumulation_steps`` must
  equal its ``global_batch_size / (dp x micro_batch)``, i.e. the layout must divide the batch the
  run logged into whole microbatches exactly as the log says.

Derived here (``derived`` column): ``dp = N / (tp x pp x cp)`` and ``global_batch = MINIBS x dp``
(the yaml's ``global_batch_size`` formula). ``MINIBS`` is the script's default; a launch may
override it (v4.0 eos_n64 ran 2,304 sequences where the script's default gives 2,048), so the
join keeps the result log's global batch and uses this one only as a check.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "data" / "raw" / "mlperf_configs" / "layouts.csv"
BENCHMARKS = ("gpt3", "llama31_405b", "llama31_8b")
COLUMNS = ("round", "submitter", "system", "benchmark", "n_accelerators", "nodes",
           "accelerators_per_node", "tp", "pp", "virtual_pipeline", "cp", "dp", "micro_batch",
           "minibs", "global_batch", "precision", "fp8_hybrid", "fp8_params",
           "sequence_parallel", "tp_comm_overlap", "selected_by", "repository", "commit",
           "config_path", "files_read", "derived")
_ASSIGN = re.compile(r'^(?:export\s+)?([A-Za-z_][A-Za-z_0-9]*)=(.*)$')
_DEFAULT = re.compile(r'\$\{([A-Za-z_][A-Za-z_0-9]*):[=-]([^}]*)\}')
_SOURCE = re.compile(r'^(?:source|\.)\s+\$\(dirname \$\{BASH_SOURCE\[0\]\}\)/(\S+)')
_ENV_DEFAULT = re.compile(r'\$\{oc\.env:([A-Z_0-9]+),([^}]*)\}')


def git(repo: Path, *args: str) -> str:
    """Output of ``git --git-dir=repo args`` (text)."""
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True,
                          capture_output=True, text=True).stdout


def _value(raw: str, env: dict[str, str]) -> str:
    """A shell assignment's right-hand side: quotes dropped, ``${X:=v}``/``${X:-v}`` resolved
    (X if set, else v), ``$X``/``${X}`` substituted; command substitutions left as text."""
    text = raw.split(" #")[0].strip().strip('"').strip("'")
    m = _DEFAULT.fullmatch(text)
    if m:
        name, default = m.groups()
        return env.get(name, default.strip('"'))
    return re.sub(r'\$\{?([A-Za-z_][A-Za-z_0-9]*)\}?', lambda g: env.get(g.group(1), g.group(0)),
                  text)


def sibling_file(repo: Path, folder: str, name: str) -> tuple[str | None, str]:
    """(text, folder) of a sourced file: the configuration's own folder, else the one other
    implementation folder of the same submission and benchmark that has it (all copies
    identical), else (None, folder)."""
    try:
        return git(repo, "show", f"HEAD:{folder}/{name}"), folder
    except subprocess.CalledProcessError:
        pass
    parent = str(PurePosixPath(folder).parent)
    texts = {}
    for other in git(repo, "ls-tree", "--name-only", "HEAD", f"{parent}/").split():
        try:
            texts[other] = git(repo, "show", f"HEAD:{other}/{name}")
        except subprocess.CalledProcessError:
            continue
    if texts and len(set(texts.values())) == 1:
        other = sorted(texts)[0]
        return texts[other], other
    return None, folder


def read_script(repo: Path, folder: str, name: str, env: dict[str, str],
                read: list[str]) -> None:
    """Apply one config script to ``env`` in file order (module docstring for the subset)."""
    text, where = sibling_file(repo, folder, name)
    if text is None:
        read.append(f"absent:{name}")  # sourced but not in the repository: named, not guessed
        env["__absent__"] = name  # it might set FP8/FP4: precision unknown unless set after
        return
    read.append(name if where == folder else f"{where}/{name}")
    depth = 0  # nesting of if-blocks whose condition is taken as false (then: skip)
    taking = [True]
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if re.match(r'^if\b', s):
            taking.append(False)
            depth += 1
            continue
        if re.match(r'^elif\b', s):
            continue  # condition false as well
        if s == "else" and depth:
            taking[-1] = all(taking[:-1])
            continue
        if s == "fi" and depth:
            taking.pop()
            depth -= 1
            continue
        if not all(taking):
            continue
        if (m := _SOURCE.match(s)):
            read_script(repo, folder, m.group(1), env, read)
        elif (m := re.match(r'^:\s+"?\$\{([A-Za-z_0-9]+):=([^}]*)\}"?', s)):
            env.setdefault(m.group(1), m.group(2).strip('"'))
        elif (m := re.match(r'^unset\s+([A-Za-z_0-9 ]+)$', s)):
            for name_ in m.group(1).split():
                env.pop(name_, None)
        elif (m := _ASSIGN.match(s)) and "+=" not in s:
            env[m.group(1)] = _value(m.group(2), env)
            if m.group(1) in ("FP8", "FP4"):
                env.pop("__absent__", None)
            elif m.group(1) in ("FP8_PARAM_GATHER", "FP8_PARAMS") and env[m.group(1)] == "True" \
                    and env.pop("__absent__", None):
                env["__fp8_by__"] = m.group(1)  # FP8 weights imply FP8 compute: derived


def yaml_defaults(repo: Path, folder: str) -> dict[str, str]:
    """``${oc.env:NAME,default}`` defaults of the implementation's ``conf/*.yaml``."""
    out: dict[str, str] = {}
    for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD", f"{folder}/conf").split():
        if path.endswith(".yaml"):
            for name, default in _ENV_DEFAULT.findall(git(repo, "show", f"HEAD:{path}")):
                out.setdefault(name, default)
    return out


def configs_of(repo: Path, folder: str) -> list[str]:
    names = git(repo, "ls-tree", "--name-only", "HEAD", f"{folder}/").split()
    return [PurePosixPath(n).name for n in names
            if re.fullmatch(r"config_[^/]*\d+x\d+x[^/]*\.sh", PurePosixPath(n).name)]


def resolve(repo: Path, folder: str, name: str) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    read: list[str] = []
    read_script(repo, folder, name, env, read)
    return env, read


def readme_choice(repo: Path, folder: str, system: str) -> str | None:
    """The configuration ``README-<system>.md`` says to source, if it names one."""
    path = f"{folder}/README-{system}.md"
    try:
        text = git(repo, "show", f"HEAD:{path}")
    except subprocess.CalledProcessError:
        return None
    m = re.search(r"source\s+(config_\S+\.sh)", text)
    return m.group(1) if m else None


def _precision(env: dict[str, str]) -> str:
    """``nvfp4`` where ``FP4`` is on (config_common_fp4.sh), ``fp8`` where ``FP8`` is, else the
    trainer's ``precision: bf16`` (conf/custom.yaml); empty where an absent file might set it."""
    if "__absent__" in env:
        return ""
    if env.get("FP4", "False") == "True":
        return env.get("FP4_RECIPE", "nvfp4")
    return "fp8" if env.get("FP8", "False") == "True" else "bf16"


CHIPS = ("GB300", "GB200", "B300", "B200", "H200", "H100")


def chip_of(text: str) -> str | None:
    """The NVIDIA chip a system description or a configuration's name states (GB200 before
    B200, so that a GB200 is not read as a B200)."""
    up = text.upper()
    for chip in CHIPS:
        if re.search(rf"(?<!G){chip}", up):
            return chip
    return None


def pick(repo: Path, bench_dir: str, ref: dict[str, str]) -> tuple[str, str, str] | str:
    """(folder, config file, how chosen) for one system, or the reason there is none."""
    system, n = ref["system"], int(ref["n_accelerators"])
    folders = [f for f in git(repo, "ls-tree", "--name-only", "HEAD",
                              f"{bench_dir}/implementations/").split()]
    for folder in folders:
        chosen = readme_choice(repo, folder, system)
        if chosen:
            homes = [f for f in [folder, *folders] if chosen in configs_of(repo, f)]
            if homes:
                return homes[0], chosen, f"README-{system}.md"
            return f"README-{system}.md names {chosen}, found in no folder"
    chip = chip_of(ref["accelerator_model"])
    if chip is None:
        return f"{ref['accelerator_model']}: not a chip NVIDIA's recipe configurations name"
    # a folder named after the system (or its prefix, hpg.dgxb200x8 for hpg.dgxb200x8.n8) first
    own = [f for f in folders if system.startswith(PurePosixPath(f).name)]
    matches = []
    for folder in own or folders:
        for name in configs_of(repo, folder):
            if chip_of(name) not in (chip, None):
                continue  # a configuration for another chip (None: named after a server)
            try:
                row = layout_of(repo, folder, name, n)
            except (TypeError, ValueError, ZeroDivisionError):
                continue  # not a configuration of this recipe (no TP/PP/micro-batch stated)
            if row["nodes"] * row["accelerators_per_node"] == n and check(row, ref) is None:
                matches.append((folder, name, row))
    facts = {tuple(r[k] for k in FACTS) for _, _, r in matches}
    if len(facts) == 1:
        names = sorted({m[1] for m in matches})
        how = "the one configuration" if len(names) == 1 else f"{len(names)} agreeing"
        return matches[0][0], matches[0][1], \
            f"{how} for {chip} with DGXNNODES x DGXNGPU = N and the log's GA"
    return (f"{len(facts)} layouts among configurations for {chip} with DGXNNODES x DGXNGPU"
            f" = {n} that fit the log's GA: {sorted({m[1] for m in matches})}")


FACTS = ("tp", "pp", "virtual_pipeline", "cp", "micro_batch", "precision")


def layout_of(repo: Path, folder: str, name: str, n: int) -> dict[str, object]:
    """The layout one configuration states for a job on ``n`` accelerators."""
    env, read = resolve(repo, folder, name)
    d = yaml_defaults(repo, folder)
    get = lambda k: env.get(k, d.get(k))  # noqa: E731 -- script value, else the yaml default
    tp, pp = int(get("TENSOR_MODEL_PARALLEL")), int(get("PIPELINE_MODEL_PARALLEL"))
    cp = int(get("CONTEXT_PARALLEL") or 1)
    vp_raw = get("INTERLEAVED_PIPELINE")
    vp = 1 if vp_raw in (None, "null", "0", "None") or pp == 1 else int(vp_raw)
    mbs, minibs = int(get("MICRO_BATCH_SIZE")), int(get("MINIBS"))
    dp = n // (tp * pp * cp)
    return {
        "n_accelerators": n, "nodes": int(get("DGXNNODES") or 0),
        "accelerators_per_node": int(get("DGXNGPU") or 8), "tp": tp, "pp": pp,
        "virtual_pipeline": vp, "cp": cp, "dp": dp, "micro_batch": mbs, "minibs": minibs,
        "global_batch": minibs * dp, "precision": _precision(env),
        "fp8_hybrid": get("FP8_HYBRID"), "fp8_params": get("FP8_PARAMS"),
        "sequence_parallel": get("SEQ_PARALLEL"), "tp_comm_overlap": get("TP_COMM_OVERLAP"),
        "config_path": f"{folder}/{name}",
        "files_read": ";".join(read + (["conf/*.yaml defaults"] if any(
            k not in env for k in ("INTERLEAVED_PIPELINE", "CONTEXT_PARALLEL")) else [])),
        "derived": "dp;global_batch" + (";precision" if "__fp8_by__" in env else ""),
    }


def row_of(version: str, repo: Path, ref: dict[str, str]) -> dict[str, object] | str:
    """One layouts.csv row for a (round, submitter, system, benchmark), or why there is none."""
    n = int(ref["n_accelerators"])
    choice = pick(repo, f"{ref['submitter']}/benchmarks/{ref['benchmark']}", ref)
    if isinstance(choice, str):
        return choice
    folder, name, how = choice
    row = {"round": version, "submitter": ref["submitter"], "system": ref["system"],
           "benchmark": ref["benchmark"], **layout_of(repo, folder, name, n),
           "selected_by": how, "repository": f"mlcommons/training_results_{version}",
           "commit": git(repo, "rev-parse", "HEAD").strip()}
    return row


def systems(reference: Path) -> list[dict[str, str]]:
    """One reference row per (round, submitter, system, benchmark) of the LLM pretraining
    benchmarks (``mlperf_results.csv``; re-published duplicates left out)."""
    seen, out = set(), []
    with reference.open(newline="") as fh:
        for ref in csv.DictReader(fh):
            key = (ref["version"], ref["submitter"], ref["system"], ref["benchmark"])
            if ref["benchmark"] in BENCHMARKS and not ref["dup_of"] and key not in seen:
                seen.add(key)
                out.append(ref)
    return out


def check(row: dict[str, object], ref: dict[str, str]) -> str | None:
    """The result log's gradient accumulation must be its global batch / (dp x micro-batch)."""
    gbs, ga = float(ref["global_batch_size"] or "nan"), float(
        ref["gradient_accumulation_steps"] or "nan")
    want = gbs / (int(row["dp"]) * int(row["micro_batch"]))
    if ga == ga and abs(want - ga) > 1e-9:
        return f"log GA {ga:g} != log GBS {gbs:g} / (dp {row['dp']} x mbs {row['micro_batch']})"
    if int(row["tp"]) * int(row["pp"]) * int(row["cp"]) * int(row["dp"]) != int(
            row["n_accelerators"]):
        return "tp x pp x cp does not divide N"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", default=[],
                        help="ROUND=GITDIR, e.g. v4.0=/m/training_results_v4.0.git")
    parser.add_argument("--reference", type=Path,
                        default=ROOT.parent / "shared" / "reference-data" / "mlperf_results.csv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    repos = dict(item.split("=", 1) for item in args.repo)
    rows = []
    for ref in systems(args.reference):
        if ref["version"] not in repos:
            continue
        row = row_of(ref["version"], Path(repos[ref["version"]]), ref)
        why = row if isinstance(row, str) else check(row, ref)
        label = f"{ref['version']} {ref['submitter']} {ref['system']} {ref['benchmark']}"
        if why:
            print(f"left out: {label}: {why}")
            continue
        rows.append(row)
        print(f"row: {label}: {row['config_path']} ({row['selected_by']})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
