"""
recbole_attn.tuning.outputs
###########################

What a search writes into its output folder: the trial table (``trials.csv``,
``trials.md``), the selected configuration (``best.yaml``, for ``--config_files``) and
``result.json``.
"""

import csv
import json
import os

import yaml

#: what a search writes into its output folder (an earlier search's are never replaced
#: without ``overwrite``)
OUTPUTS = ("trials.csv", "trials.md", "best.yaml", "result.json", "saved", "ray")


def write_outputs(output, result, overrides, params):
    """``trials.csv`` and ``trials.md`` (every trial), ``best.yaml`` (the selected
    configuration: the user's overrides and the selected values; ``--config_files``
    accepts it) and ``result.json``."""
    names = [p.name for p in params]
    header = names + ["best_valid_score", "epochs", "stop_reason", "saved_model_file"]
    rows = [
        [t["params"][n] for n in names]
        + [
            f"{t['best_valid_score']:.6f}",
            t["epochs"],
            t["stop_reason"],
            t["saved_model_file"],
        ]
        for t in result["trials"]
    ]
    with open(os.path.join(output, "trials.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    best = result["best_params"]
    lines = [
        f"# {result['model']} on {result['dataset']}: {len(rows)} trials, "
        f"algo {result['algo']} ({result['tool']}, scheduler {result['scheduler']}), "
        f"{result['search_seconds']} s",
        "",
        f"Selected on validation {result['valid_metric']}; only the selected "
        "configuration was evaluated on test.",
        "",
        "| " + " | ".join(header[:-1]) + " | selected |",
        "|" + "---|" * len(header),
    ]
    for trial, row in zip(result["trials"], rows):
        mark = "**yes**" if trial["params"] == best else ""
        lines.append("| " + " | ".join(str(v) for v in row[:-1]) + f" | {mark} |")
    lines += [
        "",
        f"Best configuration: `{json.dumps(best)}`",
        "",
        f"Validation: `{json.dumps(result['best_valid_result'])}`",
        "",
        f"Test: `{json.dumps(result['test_result'])}`",
        "",
    ]
    with open(os.path.join(output, "trials.md"), "w") as f:
        f.write("\n".join(lines))
    from recbole_attn.values import convert_value

    # command-line overrides are strings ("50"); the yaml holds the values they spell
    chosen = {
        k: convert_value(v) if isinstance(v, str) else v
        for k, v in overrides.items()
        if k != "checkpoint_dir"
    }
    chosen.update(best)
    with open(os.path.join(output, "best.yaml"), "w") as f:
        f.write(
            f"# selected by recbole_attn.tuning for {result['model']} on "
            f"{result['dataset']} (validation {result['valid_metric']} = "
            f"{result['best_valid_score']:.4f})\n"
        )
        yaml.safe_dump(chosen, f, sort_keys=True)
    with open(os.path.join(output, "result.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)
