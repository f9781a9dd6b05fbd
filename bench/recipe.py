"""The training recipe by measurement: variants of `models.build` over seeds, judged on
the build's own validation split (no serving: every variant sees the same held-out rows).

    python -m bench.recipe --variant pooling=mean --variant pooling=cls --seeds 13,14,15
    python -m bench.recipe --variant label_smoothing=0.1 --variant epochs=8

A variant is TrainSettings fields as key=value[,key=value]. Builds go to
artifacts/models/recipe-*/ (reused when already built). Prints mean ± sd per variant of
validation accuracy (overall, per language), out-of-scope recall and in-scope flag rate
of the explicit class, ECE after scaling and build minutes; writes bench/results/recipe.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import fields, replace

from bench.common import print_table, write_results
from models.build import BUNDLED_DATA, BUNDLED_INTENTS, ROOT, TrainSettings, build


def parse_variant(text: str) -> dict:
    types = {f.name: f.type for f in fields(TrainSettings)}
    out = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key not in types:
            raise SystemExit(f"unknown setting {key!r}; settings are {', '.join(types)}")
        kind = str(types[key])
        out[key] = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes")}.get(kind, str)(
            value
        )
    return out


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variant", action="append", required=True, help="key=value[,key=value] of TrainSettings")
    p.add_argument("--seeds", default="13,14,15")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    results, rows = {}, []
    for text in a.variant:
        runs = []
        for seed in seeds:
            settings = replace(TrainSettings(), **parse_variant(text), seed=seed)
            out = ROOT / "artifacts" / "models" / f"recipe-{text.replace('=', '-').replace(',', '_')}-s{seed}"
            start = time.perf_counter()
            meta = build(BUNDLED_DATA, "text", "label", out, BUNDLED_INTENTS, settings)
            v = meta.extra["validation"]
            explicit = next(f for f in v["out_of_scope"] if f["method"] == "explicit class")
            runs.append(
                {
                    "seed": seed,
                    "accuracy": v["accuracy"],
                    **{f"acc_{k}": x for k, x in v["accuracy_by_lang"].items()},
                    "oos_recall": explicit["oos_recall"],
                    "in_scope_flagged": explicit["in_scope_flagged"],
                    "ece_after": v["ece_after"],
                    "build_min": round((time.perf_counter() - start) / 60, 1),
                }
            )
        results[text] = runs
        row = {"variant": text, "seeds": len(runs)}
        for key in ("accuracy", "acc_en", "acc_zh", "acc_ja", "oos_recall", "in_scope_flagged", "ece_after"):
            row[key] = mean_sd([r[key] for r in runs])
        row["build min (last)"] = runs[-1]["build_min"]
        rows.append(row)
    write_results("recipe", results)
    print_table(rows)


if __name__ == "__main__":
    main()
