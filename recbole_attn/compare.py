"""
recbole_attn.compare
####################

``recbole-attn compare A B [C ...]``: two or more models evaluated on the same data and
users, compared metric by metric with paired tests over users. Each input is a per-user
file (``recbole-attn evaluate --model_file=... --per_user=FILE``) or a checkpoint (it is
evaluated here, full ranking). The first is the baseline.

For each metric and each other model: both means, the relative difference to the
baseline, a 95 % confidence interval of that difference (paired t), and the p-values of
the paired t-test and of the Wilcoxon signed-rank test over users (scipy.stats), each
corrected for the number of comparisons in the table (models x metrics): Holm (default)
or Benjamini-Hochberg (``--correction=bh``). A comparison is marked significant when the
corrected p-value of the t-test is below ``--alpha`` (0.05). Inputs of other datasets,
data, splits or users are an error.

    recbole-attn compare sasrec.csv stosa.csv --output=compare.json

(``docs/compare.md``: the file formats and the statistics.)
"""

import json
import math
import os
import sys

from recbole_attn.errors import RecboleAttnError

#: what must be equal in the inputs' per-user files (their first line)
SAME = ("dataset", "data", "split", "eval_mask_history")


def holm(pvalues):
    """Holm's step-down adjusted p-values (same order as ``pvalues``)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m, out, running = len(pvalues), [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def benjamini_hochberg(pvalues):
    """Benjamini-Hochberg adjusted p-values (same order as ``pvalues``)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m, out, running = len(pvalues), [0.0] * len(pvalues), 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, min(1.0, m / (rank + 1) * pvalues[i]))
        out[i] = running
    return out


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg}


def paired(base, other):
    """The paired statistics of ``other`` against ``base`` (arrays over the same users;
    users missing in either, NaN, are left out): means, relative difference, 95 % CI of
    the difference of means (absolute and relative), paired t and Wilcoxon p-values."""
    import numpy as np
    from scipy import stats

    base, other = np.asarray(base, float), np.asarray(other, float)
    keep = ~(np.isnan(base) | np.isnan(other))
    base, other = base[keep], other[keep]
    n = len(base)
    diff = other - base
    mean_base, mean_other, mean_diff = base.mean(), other.mean(), diff.mean()
    if n > 1 and diff.std(ddof=1) > 0:
        half = stats.t.ppf(0.975, n - 1) * diff.std(ddof=1) / math.sqrt(n)
        p_t = float(stats.ttest_rel(other, base).pvalue)
        p_w = float(stats.wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
    else:  # no variation: nothing to test
        half, p_t, p_w = 0.0, 1.0, 1.0
    rel = lambda x: x / mean_base if mean_base else float("nan")
    return {
        "users": int(n),
        "baseline": float(mean_base),
        "mean": float(mean_other),
        "difference": float(mean_diff),
        "relative": float(rel(mean_diff)),
        "ci95": [float(mean_diff - half), float(mean_diff + half)],
        "ci95_relative": [float(rel(mean_diff - half)), float(rel(mean_diff + half))],
        "p_t": p_t,
        "p_wilcoxon": p_w,
    }


def load_inputs(paths, echo=print):
    """``[(label, meta, {user: {column: value}}, columns)]`` of per-user files or
    checkpoints (evaluated here)."""
    from recbole_attn.evaluator.per_user import read_per_user

    loaded = []
    for path in paths:
        if not os.path.exists(path):
            raise RecboleAttnError(f"not found: {path}")
        if path.endswith(".pth") or os.path.isdir(path):
            meta, header, rows = _evaluate(path, echo)
        else:
            meta, header, rows = read_per_user(path)
        table = {}
        for row in rows:
            table[row[0]] = {
                h: (float(v) if v != "" else float("nan"))
                for h, v in zip(header[1:], row[1:])
            }
        loaded.append((_label(path, meta), meta, table, header[2:]))
    return loaded


def _evaluate(path, echo):
    from recbole_attn.quick_start import evaluate
    from recbole_attn.recommend import newest_model_file

    model_file = newest_model_file(path)
    echo(f"evaluating {model_file} ...")
    table = evaluate(model_file, {"state": "ERROR"}, per_user=True)["per_user"]
    return table["meta"], table["header"], table["rows"]


def _label(path, meta):
    stem = os.path.splitext(os.path.basename(path.rstrip("/")))[0]
    return f"{meta.get('model', '?')} ({stem})"


def check_comparable(loaded):
    """A :class:`RecboleAttnError` naming the first difference of an input from the
    first one: dataset, data, split, history masking, or its users."""
    label0, meta0, table0, _ = loaded[0]
    for label, meta, table, _ in loaded[1:]:
        for key in SAME:
            if meta.get(key) != meta0.get(key):
                raise RecboleAttnError(
                    f"{label} and {label0} were not evaluated alike: {key} is "
                    f"{meta.get(key)!r} and {meta0.get(key)!r}; compare models "
                    "evaluated on the same data, split and ranking"
                )
        if set(table) != set(table0):
            only = sorted(set(table) ^ set(table0))[:3]
            raise RecboleAttnError(
                f"{label} and {label0} have other users ({len(table)} and "
                f"{len(table0)}; e.g. {', '.join(only)} in only one); compare models "
                "evaluated on the same users"
            )


def compare(paths, metrics=None, correction="holm", alpha=0.05, echo=print):
    """The comparison of the inputs ``paths`` (module docstring) as a dict: ``models``,
    ``users``, ``correction``, ``rows`` (one per metric and model against the
    baseline)."""
    import numpy as np

    if len(paths) < 2:
        raise RecboleAttnError(
            "compare needs at least two inputs: a baseline and a model"
        )
    if correction not in CORRECTIONS:
        raise RecboleAttnError(
            f"correction must be one of {list(CORRECTIONS)}, got {correction!r}"
        )
    loaded = load_inputs(paths, echo)
    check_comparable(loaded)
    common = [c for c in loaded[0][3] if all(c in item[3] for item in loaded)]
    columns = common if metrics is None else [m.lower() for m in metrics]
    missing = [c for c in columns if c not in common]
    if missing or not columns:
        raise RecboleAttnError(
            f"metric(s) {', '.join(missing) or '(none)'} are not in every input; "
            f"common to all: {', '.join(common) or 'none'}"
        )
    users = sorted(loaded[0][2])
    base_label, _, base_table, _ = loaded[0]
    rows = []
    for label, _, table, _ in loaded[1:]:
        for column in columns:
            stats = paired(
                np.array([base_table[u][column] for u in users]),
                np.array([table[u][column] for u in users]),
            )
            rows.append({"metric": column, "model": label, **stats})
    adjust = CORRECTIONS[correction]
    for key in ("p_t", "p_wilcoxon"):
        for row, value in zip(rows, adjust([r[key] for r in rows])):
            row[f"{key}_{correction}"] = value
    for row in rows:
        row["significant"] = bool(row[f"p_t_{correction}"] < alpha)
    return {
        "baseline": base_label,
        "models": [item[0] for item in loaded],
        "users": len(users),
        "correction": correction,
        "alpha": alpha,
        "rows": rows,
    }


def table_text(result):
    """The comparison as a console table."""
    c = result["correction"]
    name = {"holm": "Holm", "bh": "BH"}[c]
    header = (
        f"{'metric':<12} {'model':<28} {'mean':>8} {'vs base':>8} {'95% CI':>19} "
        f"{'p t':>9} {'p W':>9} {'p t ' + name:>10} {'p W ' + name:>10}"
    )
    lines = [
        f"baseline: {result['baseline']}; {result['users']} users; paired over users, "
        f"p-values corrected ({name}) for {len(result['rows'])} comparisons; "
        f"* = corrected t-test p < {result['alpha']}",
        header,
    ]
    for row in result["rows"]:
        low, high = (100 * x for x in row["ci95_relative"])
        lines.append(
            f"{row['metric']:<12} {row['model'][:28]:<28} {row['mean']:>8.4f} "
            f"{100 * row['relative']:>+7.1f}% {f'[{low:+.1f}, {high:+.1f}]%':>19} "
            f"{row['p_t']:>9.2g} {row['p_wilcoxon']:>9.2g} "
            f"{row[f'p_t_{c}']:>10.2g} {row[f'p_wilcoxon_{c}']:>10.2g}"
            + (" *" if row["significant"] else "")
        )
    return "\n".join(lines)


def write_result(result, path, overwrite=False):
    """The comparison as JSON (``.json``) or CSV (one row per comparison)."""
    import csv
    import io

    from recbole_attn.files import write_files

    if path.endswith(".json"):
        text = json.dumps(result, indent=1) + "\n"
    else:
        out = io.StringIO()
        keys = [k for k in result["rows"][0] if k not in ("ci95", "ci95_relative")]
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(keys + ["ci95_low", "ci95_high"])
        for row in result["rows"]:
            writer.writerow([row[k] for k in keys] + row["ci95"])
        text = out.getvalue()
    write_files({path: text}, "the comparison", overwrite)


def main(argv=None, prog=None):
    """``recbole-attn compare``; returns the exit status."""
    from recbole_attn.commands import command_parser, guarded

    parser = command_parser(prog, __doc__)
    parser.add_argument(
        "inputs",
        nargs="+",
        help="per-user files (evaluate --per_user) or checkpoints; the first is the "
        "baseline",
    )
    parser.add_argument(
        "--metrics",
        default=None,
        help="comma-separated, e.g. ndcg@10,recall@10 "
        "(default: every metric all inputs have)",
    )
    parser.add_argument("--correction", choices=list(CORRECTIONS), default="holm")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--output", default=None, help="a .json or .csv file")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)

    def run():
        from recbole_attn.files import refuse_existing

        if not 0 < args.alpha < 1:
            raise RecboleAttnError(f"--alpha must be in (0, 1), got {args.alpha}")
        if args.output:
            refuse_existing([args.output], "the comparison", args.overwrite)
        metrics = None
        if args.metrics:
            metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        result = compare(
            args.inputs,
            metrics,
            args.correction,
            args.alpha,
            echo=lambda line: print(line, file=sys.stderr),
        )
        print(table_text(result))
        if args.output:
            write_result(result, args.output, args.overwrite)
            print(f"written: {args.output}")
        return 0

    return guarded(run)


if __name__ == "__main__":
    sys.exit(main(prog="python -m recbole_attn.compare"))
