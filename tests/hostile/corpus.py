"""The hostile-input corpus (issue 13): one file per input class, written by ``build``.

Files that would be large (a 2 MiB sidecar, a 100,000-deep JSON line, a 70 MiB line without a
newline) are generated here rather than stored. ``EXPECTED`` maps each file (relative to the
corpus root) to the exact reject reason the ingest must give, or ``None`` where the file must
become a run (the hostile part is skipped and counted in its notes). Tables list one expected
outcome per data line.

Run as a script to write the corpus somewhere: ``python tests/hostile/corpus.py DIR``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HEADER = ("source,citation,model,params_b,accelerator,n_accelerators,tp,pp,dp,ep,"
          "tokens_per_s,mfu\n")
GOOD_ROW = "h,arXiv:0000.00000 Table 1,GPT-3,175,H100,64,8,4,2,,50000,\n"
SIDECAR = "accelerator: H100-SXM5-80GB\nn_accelerators: 8\nmodel: llama3-8b\n"
JSONL_STEPS = "".join(f'{{"step": {i}, "step_time_s": 1.0, "tokens_per_s": 100000}}\n'
                      for i in range(1, 21))
MEGATRON_STEP = (" iteration {i}/ 100 | consumed samples: {s} | elapsed time per iteration (ms): "
                 "1000.0 | learning rate: 1.0E-04 | global batch size: 64 | lm loss: 2.0E+00 |"
                 " loss scale: 1.0 | number of skipped iterations: 0 | number of nan iterations: "
                 "0 |\n")


def _billion_laughs(key: str) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text + f"{key}: *{prev}\n"


def _nested_json(depth: int) -> str:
    return '{"step": 1, "x": ' + "[" * depth + "]" * depth + "}\n"


def build(root: Path, links: bool = True) -> dict[str, object]:
    """Write the corpus under ``root`` (``published/``, ``logs/``); return ``EXPECTED``.

    ``links=False`` leaves out the symbolic links: DVC itself fails to hash a dependency
    folder holding a dangling link (``dvc repro`` stops before any stage runs; DVC issue
    treeverse/dvc#4763), so a corpus for ``dvc repro`` has none.
    """
    from pipeline.ingest.sources.steplogs.sidecar import ALLOWED_KEYS

    root = Path(root)
    pub, logs = root / "published", root / "logs"
    pub.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    expected: dict[str, object] = {}

    def write(rel: str, text: str) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        if rel.startswith("logs/") and rel.endswith((".log", ".jsonl", ".txt", ".out")):
            # each case its own configuration, not a repeat of its neighbour's
            # (pipeline/ingest/core/conflicts.py)
            (root / f"{rel}.yaml").write_text(f"system: {rel[5:].replace('/', '-')}\n")

    # Sidecars: an alias bomb under every allowed key; nesting; size.
    for key in sorted(ALLOWED_KEYS):
        write(f"logs/bomb_{key}/run.yaml", _billion_laughs(key))
        write(f"logs/bomb_{key}/steps.jsonl", JSONL_STEPS)
        expected[f"logs/bomb_{key}/steps.jsonl"] = (
            "malformed_row: sidecar {root}/logs/bomb_" + key + "/run.yaml: not valid YAML "
            "(YAML aliases (*name) are not allowed in a sidecar)")
    write("logs/deep_sidecar/run.yaml", "notes: " + "[" * 5000 + "]" * 5000 + "\n")
    write("logs/deep_sidecar/steps.jsonl", JSONL_STEPS)
    expected["logs/deep_sidecar/steps.jsonl"] = (
        "malformed_row: sidecar {root}/logs/deep_sidecar/run.yaml: not valid YAML "
        "(nested deeper than 20 levels)")
    write("logs/deep_map_sidecar/run.yaml",
          "".join("  " * i + f"k{i}:\n" for i in range(200)))
    write("logs/deep_map_sidecar/steps.jsonl", JSONL_STEPS)
    expected["logs/deep_map_sidecar/steps.jsonl"] = (
        "malformed_row: sidecar {root}/logs/deep_map_sidecar/run.yaml: not valid YAML "
        "(nested deeper than 20 levels)")
    write("logs/huge_sidecar/run.yaml", "notes: '" + "x" * (2 << 20) + "'\n")
    write("logs/huge_sidecar/steps.jsonl", JSONL_STEPS)
    expected["logs/huge_sidecar/steps.jsonl"] = (
        "malformed_row: sidecar {root}/logs/huge_sidecar/run.yaml: over 1048576 bytes; a "
        "sidecar is a short mapping")
    write("logs/python_tag/run.yaml", "notes: !!python/object/apply:os.system ['true']\n")
    write("logs/python_tag/steps.jsonl", JSONL_STEPS)
    expected["logs/python_tag/steps.jsonl"] = (
        "malformed_row: sidecar {root}/logs/python_tag/run.yaml: not valid YAML (could not "
        "determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system')")
    write("logs/list_notes/run.yaml", SIDECAR + "notes: [" + ", ".join(["x" * 100] * 1000) + "]\n")
    write("logs/list_notes/steps.jsonl", JSONL_STEPS)
    expected["logs/list_notes/steps.jsonl"] = (
        "bad_value: sidecar {root}/logs/list_notes/run.yaml: 'notes' must be a single value "
        "(line 4)")  # never built: a 1,000-item list is refused at its node

    # Nesting in the logs themselves: JSON lines 100,000 deep, per format.
    write("logs/nest/run.yaml", SIDECAR)
    write("logs/nest/only_deep.jsonl", _nested_json(100_000))
    expected["logs/nest/only_deep.jsonl"] = (
        "not_a_run: no step lines of a known format (megatron, torchtitan, nanotron, nemo, "
        "deepspeed, hf_trainer, maxtext, torchtune, composer, jsonl); set 'format:' in a sidecar to force one")
    write("logs/nest/deep_then_steps.jsonl", _nested_json(100_000) + JSONL_STEPS)
    expected["logs/nest/deep_then_steps.jsonl"] = None  # the deep line is step 1 (no values)
    write("logs/nest/deep_line_in.jsonl", JSONL_STEPS[:200] + '{"x": ' + "[" * 100_000
          + "]" * 100_000 + ', "step": 3}\n' + JSONL_STEPS[200:])
    expected["logs/nest/deep_line_in.jsonl"] = None
    write("logs/nest/hf_deep.log", "{'loss': " + "[" * 100_000 + "]" * 100_000 + ", 'step': 1}\n"
          + "".join(f"{{'loss': 2.0, 'grad_norm': 1.0, 'learning_rate': 1e-4, 'epoch': {i / 100}}}\n"
                    for i in range(1, 21)))
    expected["logs/nest/hf_deep.log"] = (
        "truncated_log: no training summary: neither the end-of-training dict ({'train_runtime': "
        "...}) nor the '***** train metrics *****' block with train_runtime and "
        "train_steps_per_second (or the total optimization steps, or a finished progress bar) "
        "was found")
    write("logs/nest/megatron_deep.log", "[" * 100_000 + "\n" + "".join(
        MEGATRON_STEP.format(i=i, s=64 * i) for i in range(1, 21)))
    expected["logs/nest/megatron_deep.log"] = None
    # A 70 MiB run without a newline (over MAX_LINE_BYTES = 64 MiB) in front of good steps.
    with open(root / "logs/nest/overlong.jsonl", "wb") as fh:
        fh.write(b"x" * (70 << 20))
        fh.write(b"\n" + JSONL_STEPS.encode())
    write("logs/nest/overlong.jsonl.yaml", "system: nest-overlong\n")
    expected["logs/nest/overlong.jsonl"] = None

    # Logs whose values are implausible.
    write("logs/zero_n/run.yaml", "accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    write("logs/zero_n/steps.jsonl", '{"n_accelerators": 0}\n' + JSONL_STEPS)
    expected["logs/zero_n/steps.jsonl"] = "out_of_range: n_accelerators=0 is not an integer >= 1"
    write("logs/huge_n/run.yaml", "accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n"
                                  "n_accelerators: 1000000000000\n")
    write("logs/huge_n/steps.jsonl", JSONL_STEPS)
    expected["logs/huge_n/steps.jsonl"] = (
        "out_of_range: n_accelerators=1000000000000 above the plausible maximum 10000000 "
        "(ingest.max_accelerators)")
    write("logs/bad_layout/run.yaml", SIDECAR + "tp: 8\npp: 4\n")
    write("logs/bad_layout/steps.jsonl", JSONL_STEPS)
    expected["logs/bad_layout/steps.jsonl"] = (
        "out_of_range: layout tp x pp = 8 x 4 = 32 does not divide n_accelerators=8")

    # Links.
    if links:
        write("logs/links/run.yaml", SIDECAR)
        write("outside.jsonl", JSONL_STEPS)
        os.symlink("nowhere.jsonl", root / "logs/links/dangling.jsonl")
        os.symlink("loop_b.log", root / "logs/links/loop_a.log")
        os.symlink("loop_a.log", root / "logs/links/loop_b.log")
        os.symlink(root / "outside.jsonl", root / "logs/links/outside.jsonl")
        expected["logs/links/dangling.jsonl"] = (
            "bad_link: dangling symlink dangling.jsonl -> nowhere.jsonl")
        expected["logs/links/loop_a.log"] = "bad_link: symlink loop loop_a.log -> loop_b.log"
        expected["logs/links/loop_b.log"] = "bad_link: symlink loop loop_b.log -> loop_a.log"
        expected["logs/links/outside.jsonl"] = (
            "bad_link: symlink outside.jsonl -> {root}/outside.jsonl points outside the data "
            "folder logs/")
        os.symlink("gone.csv", pub / "dangling.csv")
        expected["published/dangling.csv"] = ["bad_link: dangling symlink dangling.csv -> gone.csv"]

    # Published tables: one expected outcome per data line (None: a run).
    tables = {
        "quote": (HEADER + GOOD_ROW + GOOD_ROW.replace("GPT-3", '"GPT-3') + GOOD_ROW * 3,
                  [None, "malformed_row: unbalanced quote: a quoted field spans lines 3-6 but "
                   "does not make one row; this line rejected, reading resumes on the next"]
                  + ["duplicate: same run as {root}/published/quote.csv:2"] * 3),
        "semicolon": (HEADER.replace(",", ";") + GOOD_ROW.replace(",", ";"),
                      ["malformed_row: header: one column only, with ';' in it: the table "
                       "looks semicolon-delimited; format v1 is comma-separated",
                       "malformed_row: the file has no usable header"]),
        "no_citation_column": (HEADER.replace("citation,", "") + GOOD_ROW.replace(
            "arXiv:0000.00000 Table 1,", ""),
            ["missing_required: citation (a published table says where in its source each "
             "row comes from)"]),
        "empty_citation": (HEADER + GOOD_ROW.replace("arXiv:0000.00000 Table 1", ""),
                           ["missing_required: citation (a published table says where in its "
                            "source each row comes from)"]),
        "implausible": (HEADER
                        + GOOD_ROW.replace(",64,8,4,2,", ",1000000000000,,,,")
                        + GOOD_ROW.replace(",64,8,4,2,", ",64,8,4,4,")
                        + GOOD_ROW.replace(",64,8,4,2,,", ",64,,,,48,")
                        + GOOD_ROW.replace("50000,", "100,0.9"),
                        ["out_of_range: n_accelerators=1000000000000 above the plausible maximum"
                         " 10000000 (ingest.max_accelerators)",
                         "out_of_range: layout tp x pp x dp = 8 x 4 x 4 = 128 does not divide "
                         "n_accelerators=64",
                         "out_of_range: ep=48 does not divide n_accelerators=64",
                         "conflict: mfu=0.9 but tokens_per_s implies mfu 0.00170381 against the "
                         "chip's peak 9.895e+14 FLOP/s (more than 3x apart)"]),
        "ragged": (HEADER + GOOD_ROW.replace("\n", ",extra\n") + GOOD_ROW.replace("50000,", ""),
                   ["malformed_row: expected 12 fields, got 13",
                    "malformed_row: expected 12 fields, got 11"]),
        "math_and_html": (HEADER + GOOD_ROW.replace("h,", "<script>$\\frac{$</script>,", 1)
                          .replace("GPT-3", "GPT-$x^$"), ["*"]),
        "header_only": (HEADER, []),
        "nul": (HEADER + GOOD_ROW.replace("GPT-3", "GPT\x00-3"),
                ["malformed_row: NUL byte"]),
    }
    for name, (text, outcomes) in tables.items():
        write(f"published/{name}.csv", text)
        expected[f"published/{name}.csv"] = outcomes
    # A table of 5,000 rows with one unbalanced quote on its first data line.
    rows = [GOOD_ROW.replace(",64,", f",{64 * (i + 1)},") for i in range(5000)]
    rows[0] = rows[0].replace("GPT-3", '"GPT-3')
    write("published/long_quote.csv", HEADER + "".join(rows))
    expected["published/long_quote.csv"] = (
        ["malformed_row: a quoted field runs past 20 lines (unbalanced quote?); this line "
         "rejected, reading resumes on the next"] + [None] * 4999)
    return expected


def check(expected: dict[str, object], data: Path, processed: Path, project: Path) -> list[str]:
    """Differences between ``expected`` and the ingest's runs and rejects (empty: none).

    ``data`` is the corpus root; reasons name it as ``{root}`` (absolute, or relative to
    ``project`` when the corpus lies inside it, as the ingest writes paths).
    """
    import pandas as pd

    absolute = Path(data).resolve().as_posix()
    roots = [absolute]
    if Path(data).resolve().is_relative_to(Path(project).resolve()):
        roots.append(Path(data).resolve().relative_to(Path(project).resolve()).as_posix())

    def rel(path: str) -> str:
        for root in roots:
            if path.startswith(root + "/"):
                return path[len(root) + 1:]
        return path

    def shown(reason: str) -> str:
        for root in roots:
            reason = reason.replace(root, "{root}")
        return reason

    rejects = pd.read_parquet(Path(processed) / "rejects.parquet")
    runs = pd.read_parquet(Path(processed) / "runs.parquet")
    reject_rel = [rel(p) for p in rejects["path"]]
    run_rel = [rel(p.split(" (sidecar")[0].rsplit(":", 1)[0]) for p in runs["provenance"]]
    problems = []
    for name, want in expected.items():
        got = sorted(shown(r) for r, p in zip(rejects["reason"], reject_rel) if p == name)
        n_runs = run_rel.count(name)
        if isinstance(want, list):  # a table: one outcome per data line
            if n_runs + len(got) != len(want):
                problems.append(f"{name}: {n_runs} runs + {len(got)} rejects != "
                                f"{len(want)} data lines")
            elif "*" not in want and got != sorted(w for w in want if w is not None):
                problems.append(f"{name}: rejects {got}")
        elif want is None and (got or n_runs != 1):
            problems.append(f"{name}: expected a run, got {n_runs} runs and rejects {got}")
        elif isinstance(want, str) and got != [want]:
            problems.append(f"{name}: expected {want!r}, got {got} and {n_runs} runs")
    return problems


if __name__ == "__main__":
    build(Path(sys.argv[1]))
    print(f"corpus written to {sys.argv[1]}")
