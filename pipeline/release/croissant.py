"""``croissant.json``: Croissant 1.0 metadata (MLCommons, http://mlcommons.org/croissant/1.0)
of the bundle, generated from the runs' contract so it cannot drift from the data.

One ``cr:FileObject`` per data file (with its SHA-256), and two record sets: ``runs`` (every
column of ``pipeline/ingest/contract.py: RUN_COLUMNS`` plus the release's ``ADDED_COLUMNS``,
each with its type, unit and meaning) read from ``runs.csv``, and ``sources`` from
``sources.csv``. Units are SI and stated in each field's description (Croissant 1.0 has no unit
property); ``UNITS`` names the unit of every numeric column, and a numeric column without one is
an error, so a new column cannot ship undocumented.
"""

from __future__ import annotations

from typing import Any

from pipeline.ingest.contract import RUN_COLUMNS
from pipeline.release.contract import ADDED_COLUMNS, DATASET_LICENCE_URL

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
CONTEXT: dict[str, Any] = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs",
    "column": "cr:column", "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/", "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"}, "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty", "samplingRate": "cr:samplingRate",
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract",
    "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key",
    "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex",
    "repeated": "cr:repeated", "replace": "cr:replace", "sc": "https://schema.org/",
    "separator": "cr:separator", "source": "cr:source", "subField": "cr:subField",
    "transform": "cr:transform",
}
# pyarrow type names -> Croissant (schema.org) data types.
DATA_TYPES = {"string": "sc:Text", "large_string": "sc:Text", "int64": "sc:Integer",
              "int32": "sc:Integer", "double": "sc:Float", "bool": "sc:Boolean"}
# The unit of every numeric column (SI; "count" for a plain number, "1" for a ratio).
UNITS = {
    "params": "count (parameters)", "active_params": "count (parameters)",
    "n_layers": "count", "d_model": "count", "seq_len": "tokens", "n_accelerators": "count",
    "accelerators_per_node": "count", "peak_flops_per_s_per_accelerator": "FLOP/s",
    "flops_per_hbm_byte": "FLOP/B", "flops_per_scaleout_byte": "FLOP/B", "dp": "count",
    "tp": "count", "pp": "count", "cp": "count", "ep": "count", "zero_stage": "1",
    "micro_batch": "sequences", "virtual_pipeline": "count",
    "pipeline_flushes": "count", "global_batch_tokens": "tokens",
    "tokens_per_s": "tokens/s", "tokens_per_s_per_accelerator": "tokens/s",
    "model_flops_per_s": "FLOP/s", "hardware_flops_per_s": "FLOP/s", "mfu": "1 (fraction)",
    "mfu_source_count": "1 (fraction)", "hfu": "1 (fraction)", "step_time_s": "s", "time_to_train_s": "s",
    "inverse_time_to_train_per_s": "1/s", "power_w_per_accelerator": "W",
    "energy_j_per_token": "J/token", "peak_memory_bytes": "B", "energy_j": "J",
    "energy_j_nodes": "J", "energy_j_interconnect": "J", "olympic_score_s": "s",
    "year": "year", "n_experts": "count", "top_k": "count",
    "capacity_factor": "1 (tokens per expert over the even share)",
}
SOURCE_FIELDS = (("source", "sc:Text", "source id, as in runs"),
                 ("citation", "sc:Text", "how to cite it: publisher (date). title. URL"),
                 ("title", "sc:Text", "title of the publication or file"),
                 ("url", "sc:URL", "where it can be read"),
                 ("licence", "sc:Text", "its licence, or that none is stated"),
                 ("terms", "sc:Text", "on what basis its values are used"),
                 ("runs", "sc:Integer", "runs released from it"))


def run_fields() -> list[tuple[str, str, str]]:
    """(name, Croissant data type, description with unit) of every released run column."""
    out = []
    for name, arrow_type, meaning in RUN_COLUMNS:
        out.append(_field(name, str(arrow_type), meaning))
    for name, arrow_type, meaning in ADDED_COLUMNS:
        out.append(_field(name, arrow_type, meaning))
    return out


def _field(name: str, arrow_type: str, meaning: str) -> tuple[str, str, str]:
    data_type = DATA_TYPES.get(arrow_type)
    if data_type is None:
        raise ValueError(f"croissant: column {name}: no Croissant type for {arrow_type}")
    if data_type in ("sc:Integer", "sc:Float"):
        if name not in UNITS:
            raise ValueError(f"croissant: numeric column {name} has no unit in UNITS")
        meaning = f"{meaning} [unit: {UNITS[name]}]"
    return name, data_type, meaning


def _file(name: str, fmt: str, sha256: str, description: str) -> dict[str, Any]:
    return {"@type": "cr:FileObject", "@id": name, "name": name, "description": description,
            "contentUrl": name, "encodingFormat": fmt, "sha256": sha256}


def _record_set(set_id: str, file_id: str, fields: list[tuple[str, str, str]],
                description: str) -> dict[str, Any]:
    return {"@type": "cr:RecordSet", "@id": set_id, "name": set_id, "description": description,
            "field": [{"@type": "cr:Field", "@id": f"{set_id}/{name}", "name": name,
                       "description": text, "dataType": data_type,
                       "source": {"fileObject": {"@id": file_id},
                                  "extract": {"column": name}}}
                      for name, data_type, text in fields]}


def metadata(version: str, sha256: dict[str, str], info: dict[str, Any]) -> dict[str, Any]:
    """The Croissant document. ``info``: ``description``, ``date_published`` (``YYYY-MM-DD``,
    from the data), ``cite_as`` (BibTeX), ``runs``, ``sources``. No ``url``: the bundle names no
    hosting place of its own (it is built where the pipeline runs)."""
    return {
        "@context": CONTEXT, "@type": "sc:Dataset", "conformsTo": CONFORMS_TO,
        "name": "scalewall-runs", "version": version,
        "description": info["description"], "license": DATASET_LICENCE_URL,
        "datePublished": info["date_published"],
        "citeAs": info["cite_as"], "keywords": ["distributed training", "scaling",
                                                "MFU", "throughput", "accelerators"],
        "creator": {"@type": "sc:Organization", "name": "scalewall contributors"},
        "distribution": [
            _file("runs.csv", "text/csv", sha256["runs.csv"],
                  f"{info['runs']} measured training runs, one row per configuration"),
            _file("runs.parquet", "application/x-parquet", sha256["runs.parquet"],
                  "the same runs as Parquet (typed)"),
            _file("sources.csv", "text/csv", sha256["sources.csv"],
                  f"{info['sources']} sources: citation, URL, licence or terms, rows, derived"),
        ],
        "recordSet": [
            _record_set("runs", "runs.csv", run_fields(),
                        "one measured training configuration per record"),
            _record_set("sources", "sources.csv", list(SOURCE_FIELDS),
                        "one source per record, with its licence or terms"),
        ],
    }
