"""Hostile inputs by class, one generator each: numbers, files, text, YAML, phases.

Each generator writes its cases under ``root`` (``logs/<class>_<case>/...`` and
``published/<class>_<case>.csv``) and returns ``{relative path: Expect}``: the exact outcome the
ingest must give that file (a reject code with the words its reason must hold, or a run with
values). Every file a generator writes that a reader considers is listed, so a test can check
that none is lost. ``tests/hostile/test_reliability.py`` runs them; run this file as a script
to write the corpus somewhere: ``python tests/hostile/generators.py DIR``.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SIDECAR = "accelerator: H100-SXM5-80GB\nn_accelerators: 8\nmodel: llama3-8b\n"
HEADER = "source,citation,model,params_b,accelerator,n_accelerators,tokens_per_s\n"
MEGATRON = (" iteration {i}/ 100 | consumed samples: {s} | elapsed time per iteration (ms): "
            "{ms} | learning rate: 1.0E-04 | global batch size: 64 | lm loss: 2.0E+00 |"
            " loss scale: 1.0 | number of skipped iterations: 0 | number of nan iterations: 0 |")
HUGE = "1" * 400


@dataclass
class Expect:
    """A run (``run``: column -> value; ``notes``: words its notes hold) or a reject
    (``code`` and the words its reason holds)."""

    code: str | None = None
    words: tuple[str, ...] = ()
    run: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _jsonl(n: int = 20, t: float = 1.0, start: int = 1, **extra: Any) -> str:
    more = "".join(f', "{k}": {v}' for k, v in extra.items())
    return "".join(f'{{"step": {i}, "step_time_s": {t}, "tokens_per_s": 100000{more}}}\n'
                   for i in range(start, start + n))


def _megatron_lines(n: int = 20, ms: str = "1000.0") -> list[str]:
    return [MEGATRON.format(i=i, s=64 * i, ms=ms) for i in range(1, n + 1)]


class _Writer:
    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, rel: str, text: str) -> None:
        self.bytes(rel, text.encode("utf-8"))

    def bytes(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        folder_sidecar = path.parent / "run.yaml"
        if rel.startswith("logs/") and rel.endswith((".log", ".jsonl", ".txt", ".out")) and not (
                folder_sidecar.is_file() and "system:" in folder_sidecar.read_text("utf-8")):
            # Each case is a configuration of its own (a system named after its file): cases
            # that share a sidecar are not repeats of one configuration (ingest.core.conflicts).
            (self.root / f"{rel}.yaml").write_text(f"system: {rel[5:].replace('/', '-')}\n")


def numbers(root: Path) -> dict[str, Expect]:
    """Values that parse as numbers but no input means: huge, non-finite, implausible."""
    w, out = _Writer(root), {}
    w.text("logs/num_huge_sidecar/run.yaml", SIDECAR.replace("8\n", HUGE + "\n", 1))
    w.text("logs/num_huge_sidecar/steps.jsonl", _jsonl())
    out["logs/num_huge_sidecar/steps.jsonl"] = Expect(
        "bad_value", ("'n_accelerators' must be a non-negative integer", "400 characters"))
    w.text("logs/num_huge_jsonl/run.yaml", "accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    w.text("logs/num_huge_jsonl/steps.jsonl", f'{{"n_accelerators": {HUGE}}}\n' + _jsonl())
    out["logs/num_huge_jsonl/steps.jsonl"] = Expect(
        "bad_value", ("n_accelerators=<integer of 400 digits> is not a finite number",))
    w.text("logs/num_huge_step/run.yaml", SIDECAR)
    w.text("logs/num_huge_step/steps.jsonl",
           _jsonl() + f'{{"step": {HUGE}, "step_time_s": 1.0}}\n'
           + f'{{"step": 21, "step_time_s": 1.0, "tokens_per_s": {HUGE}}}\n')
    out["logs/num_huge_step/steps.jsonl"] = Expect(run={"n_accelerators": 8,
                                                        "step_time_s": 1.0},
                                                   notes=("1 step-like line(s) that did not "
                                                          "parse skipped",))
    for name, value in (("tiny", "1e-30"), ("huge", "1e290")):
        w.text(f"logs/num_params_{name}/run.yaml", SIDECAR + f"params_b: {value}\n")
        w.text(f"logs/num_params_{name}/steps.jsonl", _jsonl())
        out[f"logs/num_params_{name}/steps.jsonl"] = Expect(
            "out_of_range", (f"params_b={float(value):.6g} outside the plausible",))
    # params_b in millions (8000 for an 8 B model): the shape holds 1/1000 of it.
    w.text("logs/num_shape/run.yaml",
           SIDECAR.replace("llama3-8b", "my-model") + "params_b: 8000\nn_layers: 32\n"
           "d_model: 4096\n")
    w.text("logs/num_shape/steps.jsonl", _jsonl())
    out["logs/num_shape/steps.jsonl"] = Expect("out_of_range", ("shape n_layers=32, d_model=4096",
                                                                "ratio 1.24e+03"))
    w.text("logs/num_nan_word/run.yaml", SIDECAR.replace("8\n", ".nan\n", 1))
    w.text("logs/num_nan_word/steps.jsonl", _jsonl())
    out["logs/num_nan_word/steps.jsonl"] = Expect("bad_value", ("n_accelerators", "finite"))
    w.text("logs/num_negative/run.yaml", SIDECAR)
    w.text("logs/num_negative/steps.jsonl",
           "".join(f'{{"step": {i}, "step_time_s": {-1.0 if i % 2 else 1.0}, '
                   f'"tokens_per_s": 100000}}\n' for i in range(1, 41)))
    out["logs/num_negative/steps.jsonl"] = Expect(
        run={"step_time_s": 1.0},
        notes=("20 step(s) with a step time <= 0 or above 1e+06 s left out (20 negative: lines "
               "1, 3, 5, 7, 9, ...)",))
    w.text("logs/num_inf/run.yaml", SIDECAR)
    w.text("logs/num_inf/steps.log", "\n".join(_megatron_lines(20) + [
        MEGATRON.format(i=i, s=64 * i, ms="1e400") for i in (21, 22)]) + "\n")
    out["logs/num_inf/steps.log"] = Expect(
        run={"step_time_s": 1.0}, notes=("2 step(s) with a step time <= 0 or above 1e+06 s "
                                         "left out (2 above 1e+06 s (infinite included): "
                                         "lines 21, 22)",))
    w.text("logs/num_zero/run.yaml", SIDECAR)
    w.text("logs/num_zero/steps.jsonl", _jsonl(20) + _jsonl(5, t=0.0, start=21))
    out["logs/num_zero/steps.jsonl"] = Expect(
        run={"step_time_s": 1.0}, notes=("5 step(s) with a step time <= 0", "5 zero"))
    rows = [f"n,c,GPT-3,175,H100,{HUGE},50000", "n,c,GPT-3,175,H100,64,1e400",
            "n,c,GPT-3,1e-30,H100,64,50000", "n,c,GPT-3,175,H100,64,-5",
            "n,c,GPT-3,175,H100,0x40,50000", "n,c,GPT-3,175,H100,1_000,50000"]
    w.text("published/num_table.csv", HEADER + "\n".join(rows) + "\n")
    out["published/num_table.csv"] = [
        Expect("bad_value", ("n_accelerators=", "400 characters")),
        Expect("bad_value", ("tokens_per_s='1e400' is not a finite number",)),
        Expect("out_of_range", ("params_b=1e-30 outside the plausible",)),
        Expect("out_of_range", ("tokens_per_s='-5' must be > 0",)),
        Expect("bad_value", ("n_accelerators='0x40' is not a number",)),
        Expect("bad_value", ("n_accelerators='1_000' is not a number",))]
    return out


def _mknod(path: Path, kind: str) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
            sock.close()
        else:  # a character device like /dev/null (needs root)
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (OSError, AttributeError):
        return False
    return True


def files(root: Path) -> dict[str, Expect]:
    """Entries that are not regular files where inputs are looked for."""
    w, out = _Writer(root), {}
    for kind, name in (("fifo", "pipe.log"), ("socket", "s.log"),
                       ("character device", "dev.log")):
        rel = f"logs/files_{kind.split()[0]}/{name}"
        if _mknod(root / rel, kind):
            out[rel] = Expect("special_file", (f"{name} is a {kind}, not a regular file",))
    (root / "logs/files_dir/job.log").mkdir(parents=True)
    out["logs/files_dir/job.log"] = Expect("special_file", ("job.log/ is a directory",))
    (root / "logs/files_sidecar_dir/run.yaml").mkdir(parents=True)
    w.text("logs/files_sidecar_dir/steps.jsonl", _jsonl())
    out["logs/files_sidecar_dir/steps.jsonl"] = Expect(
        "special_file", ("sidecar run.yaml is a directory, not a file",))
    if _mknod(root / "published/files_fifo.csv", "fifo"):
        out["published/files_fifo.csv"] = [Expect("special_file", ("files_fifo.csv is a fifo",))]
    return out


def text(root: Path) -> dict[str, Expect]:
    """Line ends, encodings, stray bytes and invisible characters."""
    w, out = _Writer(root), {}
    lines = _megatron_lines()
    body = "\n".join(lines) + "\n"
    run = Expect(run={"step_time_s": 1.0, "n_accelerators": 8},
                 notes=("20 steps logged",))
    for folder in ("text_ends", "text_enc", "text_latin1"):
        w.text(f"logs/{folder}/run.yaml", SIDECAR)
    w.bytes("logs/text_ends/cr.log", body.replace("\n", "\r").encode())
    w.bytes("logs/text_ends/crlf.log", body.replace("\n", "\r\n").encode())
    mixed = "".join(line + ("\n", "\r\n", "\r")[i % 3] for i, line in enumerate(lines))
    w.bytes("logs/text_ends/mixed.log", mixed.encode())
    for rel in ("cr", "crlf", "mixed"):
        out[f"logs/text_ends/{rel}.log"] = run
    # A progress bar: redraws of one line with lone CRs (nothing else on the line).
    w.bytes("logs/text_ends/bar.log", ("\r".join(f"{line}" for line in lines) + "\n").encode())
    out["logs/text_ends/bar.log"] = run
    for enc, note in (("utf-16", "UTF-16-LE"), ("utf-32", "UTF-32-LE")):
        w.bytes(f"logs/text_enc/{enc}.log", body.encode(enc))
        out[f"logs/text_enc/{enc}.log"] = Expect(run=run.run, notes=(f"decoded from {note}",))
    w.bytes("logs/text_enc/utf16be.log", b"\xfe\xff" + body.encode("utf-16-be"))
    out["logs/text_enc/utf16be.log"] = Expect(run=run.run, notes=("decoded from UTF-16-BE",))
    w.bytes("logs/text_enc/utf8bom.log", b"\xef\xbb\xbf" + body.encode())
    out["logs/text_enc/utf8bom.log"] = run
    w.bytes("logs/text_enc/nobom.log", body.encode("utf-16-le"))
    out["logs/text_enc/nobom.log"] = Expect(
        "binary_file", ("UTF-16LE text without a byte-order mark",
                        "iconv -f UTF-16LE -t UTF-8 nobom.log > nobom.utf8.log"))
    stray = list(lines)
    stray[5] = stray[5].replace("learning rate", "learning r\xe9te")
    w.bytes("logs/text_latin1/word.log", ("\n".join(stray) + "\n").encode("latin-1"))
    out["logs/text_latin1/word.log"] = Expect(run=run.run, notes=(
        "20 steps logged", "1 byte sequence(s) that are not UTF-8 replaced"))
    stray = list(lines)
    stray[5] = stray[5].replace("1000.0", "10\xe90.0")
    w.bytes("logs/text_latin1/number.log", ("\n".join(stray) + "\n").encode("latin-1"))
    out["logs/text_latin1/number.log"] = Expect(run=run.run, notes=(
        "19 steps logged", "1 step-like line(s) that did not parse skipped"))
    w.text("logs/text_bidi/run.yaml", "source: evil\u202elog.exe\naccelerator: H100-SXM5-80GB"
                                      "\u200b\nn_accelerators: 8\nmodel: llama3-8b\n")
    w.text("logs/text_bidi/steps.jsonl", _jsonl())
    out["logs/text_bidi/steps.jsonl"] = Expect(
        run={"source": "evillog.exe", "accelerator": "H100-SXM5-80GB"},
        notes=("invisible characters removed: ", "source (U+202E)", "accelerator (U+200B)"))
    w.bytes("published/text_utf16.csv",
            (HEADER + "t,c,GPT-3,175,H100-SXM5-80GB,64,50000\r\n").encode("utf-16"))
    out["published/text_utf16.csv"] = [Expect(run={"n_accelerators": 64,
                                                   "tokens_per_s": 50000.0})]
    w.bytes("published/text_cr.csv", (HEADER + "t,c,GPT-3,175,H100-SXM5-80GB,64,50000\n"
                                        "t,c,GPT-3,175,H100-SXM5-80GB,128,90000\n"
                                        ).replace("\n", "\r").encode())
    out["published/text_cr.csv"] = [Expect(run={"n_accelerators": 64}),
                                    Expect(run={"n_accelerators": 128})]
    w.text("published/text_bidi.csv",
           HEADER + "t\u202eb,c,GPT-3,175,H100-SXM5-80GB\u200d,64,50000\n")
    out["published/text_bidi.csv"] = [Expect(run={"source": "tb",
                                                  "accelerator": "H100-SXM5-80GB"},
                                             notes=("invisible characters removed",))]
    return out


def yaml_values(root: Path) -> dict[str, Expect]:
    """YAML 1.1 coercions a sidecar must not apply, and duplicate keys."""
    w, out = _Writer(root), {}
    w.text("logs/yaml_typing/run.yaml",
           SIDECAR + "series: 010\nsystem: 1:30\nnotes: yes\nstrategy: 0x1F\n")
    w.text("logs/yaml_typing/steps.jsonl", _jsonl())
    out["logs/yaml_typing/steps.jsonl"] = Expect(
        run={"_series": "010", "system": "1:30", "strategy": "0x1F"}, notes=("yes",))
    w.text("logs/yaml_dup/run.yaml", "accelerator: H100-SXM5-80GB\nn_accelerators: 8\n"
                                     "model: llama3-8b\nn_accelerators: 16\n")
    w.text("logs/yaml_dup/steps.jsonl", _jsonl())
    out["logs/yaml_dup/steps.jsonl"] = Expect(
        "malformed_row", ("duplicate key 'n_accelerators' at lines 2 and 4",))
    w.text("logs/yaml_list/run.yaml", SIDECAR + "tp: [2, 4]\n")
    w.text("logs/yaml_list/steps.jsonl", _jsonl())
    out["logs/yaml_list/steps.jsonl"] = Expect("bad_value", ("'tp' must be a single value "
                                                             "(line 4)",))
    return out


def phases(root: Path) -> dict[str, Expect]:
    """Logs whose shape changes part-way, and a restart that does not change it."""
    w, out = _Writer(root), {}
    w.text("logs/phase_n/run.yaml", "accelerator: H100-SXM5-80GB\nmodel: llama3-8b\n")
    w.text("logs/phase_n/elastic.jsonl", '{"n_accelerators": 64}\n' + _jsonl(20)
           + '{"n_accelerators": 128}\n' + _jsonl(20, t=0.6, start=21))
    out["logs/phase_n/elastic.jsonl"] = Expect(
        "phase_change", ("n_accelerators 64 -> 128 at line 22",
                         "head -n 21", "tail -n +22"))
    w.text("logs/phase_tp/run.yaml", SIDECAR)
    w.text("logs/phase_tp/layout.jsonl", '{"tp": 2}\n' + _jsonl(20) + '{"tp": 4}\n'
           + _jsonl(20, start=21))
    out["logs/phase_tp/layout.jsonl"] = Expect("phase_change", ("tp 2 -> 4 at line 22",))
    w.text("logs/phase_batch/run.yaml", SIDECAR + "seq_len: 4096\n")
    w.text("logs/phase_batch/batch.jsonl", _jsonl(20, batch_samples=64)
           + _jsonl(20, start=21, batch_samples=128))
    out["logs/phase_batch/batch.jsonl"] = Expect(
        run={"global_batch_tokens": 128 * 4096.0},
        notes=("20 steps at the final batch 128 sequences kept",
               "steps at other batches left out (20 at 64)"))
    w.text("logs/phase_batch_short/run.yaml", SIDECAR + "seq_len: 4096\n")
    w.text("logs/phase_batch_short/batch.jsonl", _jsonl(20, batch_samples=64)
           + _jsonl(2, start=21, batch_samples=128))
    out["logs/phase_batch_short/batch.jsonl"] = Expect(
        "phase_change", ("global batch changes in steady state", "fewer than "
                         "min_steady_steps"))
    w.text("logs/phase_restart/run.yaml", SIDECAR)
    w.text("logs/phase_restart/resumed.jsonl", _jsonl(20) + _jsonl(20))
    out["logs/phase_restart/resumed.jsonl"] = Expect(run={"step_time_s": 1.0},
                                                     notes=("1 restart(s)",))
    return out


GENERATORS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "numbers": numbers, "files": files, "text": text, "yaml": yaml_values, "phases": phases}


def build(root: Path) -> dict[str, dict[str, Any]]:
    """Every class under ``root``: {class: {relative path: Expect or [Expect per row]}}."""
    root = Path(root)
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (root / "published").mkdir(parents=True, exist_ok=True)
    return {name: make(root) for name, make in GENERATORS.items()}


if __name__ == "__main__":  # pragma: no cover
    build(Path(sys.argv[1]))
