"""Run by tests/test_upstream.py in a child process whose ``recbole`` is a copy (or a
checkout) with the export written into it, and which never imports ``recbole_attn``:
every configuration block, ``run_recbole`` example and ``hyper.test`` line of the
exported docs pages, in RecBole's own ``Config``; with ``--run``, also RecBole's own
``run_recbole`` of each example, alone and with each configuration block, for one epoch
on a small dataset named ``ml-100k`` in ml-100k's format (its ``class`` genres too).

    python upstream_docs_examples.py PAGES_JSON_FILE [--run DATA_DIR]

PAGES_JSON_FILE: a file of ``{model: page text}``; prints one JSON line: per model, what was checked.
"""

import ast
import json
import os
import random
import re
import sys


def blocks(page, language):
    """The code blocks ``.. code:: language`` of an rst page, dedented."""
    out = []
    for match in re.finditer(
        rf"^\.\. code:: {language}\n\n((?:   .*\n|\n)+)", page, re.M
    ):
        lines = match.group(1).rstrip("\n").split("\n")
        out.append("".join(line[3:] + "\n" for line in lines))
    return out


def examples(page):
    """The ``run_recbole`` calls of the page's python blocks: ``(code, kwargs)``."""
    out = []
    for code in blocks(page, "python"):
        if "run_recbole(" not in code:
            continue
        calls = []

        def run_recbole(**kwargs):
            calls.append(kwargs)

        # the example as written, run_recbole recording its arguments
        tree = ast.parse(code)
        tree.body = [n for n in tree.body if not isinstance(n, ast.ImportFrom)]
        exec(compile(tree, "<docs example>", "exec"), {"run_recbole": run_recbole})
        assert len(calls) == 1, code
        out.append((code, calls[0]))
    return out


def hyper_lines(page):
    """``{key: choices}`` of the page's ``hyper.test``, parsed as RecBole's
    ``HyperTuning._build_space_from_file`` parses it."""
    out = {}
    for code in blocks(page, "bash"):
        for line in code.splitlines():
            parts = line.strip().split(" ")
            if len(parts) >= 3 and parts[1] == "choice":
                out[parts[0]] = eval("".join(parts[2:]))
    return out


def computable(config):
    """The ``valid_metric`` of ``config`` is one its validation results hold."""
    metric, _, k = config["valid_metric"].partition("@")
    metrics = [m.lower() for m in config["metrics"]]
    return metric.lower() in metrics and (not k or int(k) in config["topk"])


def write_ml_100k(folder, users=40, items=60, per_user=15, seed=0):
    """A small dataset in ml-100k's atomic files (the fields of RecBole's ml-100k)."""
    rng = random.Random(seed)
    genres = ["Action", "Comedy", "Drama", "Horror", "Romance", "Thriller"]
    os.makedirs(os.path.join(folder, "ml-100k"), exist_ok=True)
    with open(os.path.join(folder, "ml-100k", "ml-100k.inter"), "w") as f:
        f.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        for user in range(1, users + 1):
            for step, item in enumerate(rng.sample(range(1, items + 1), per_user)):
                f.write(f"{user}\t{item}\t{rng.randint(1, 5)}\t{880000000 + step}\n")
    with open(os.path.join(folder, "ml-100k", "ml-100k.item"), "w") as f:
        f.write(
            "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
        )
        for item in range(1, items + 1):
            classes = " ".join(rng.sample(genres, rng.randint(1, 3)))
            f.write(f"{item}\tMovie {item}\t{1990 + item % 10}\t{classes}\n")


#: what the one-epoch runs change of an example: the data and the budget only
RUN_SIZES = {"epochs": 1, "state": "ERROR", "show_progress": False}


def main(pages, data_dir=None):
    import numpy as np

    # the aliases RecBole's Config reads and numpy 2 removed (a fix of the stack)
    for alias, target in (("float_", "float64"), ("complex_", "complex128")):
        if not hasattr(np, alias):
            setattr(np, alias, getattr(np, target))
    if not hasattr(np, "unicode_"):
        np.unicode_ = np.str_
    import yaml
    from recbole.config import Config

    assert "recbole_attn" not in sys.modules
    sys.argv = sys.argv[:1]  # RecBole's Config reads the command line
    if data_dir:
        write_ml_100k(data_dir)
    out = {}
    for name, page in pages.items():
        found = examples(page)
        assert found, name
        settings = [yaml.safe_load(text) for text in blocks(page, "yaml")]
        report = {"examples": len(found), "blocks": len(settings), "runs": []}
        for code, call in found:
            assert call["model"] == name and call["dataset"] == "ml-100k", code
            given = call.get("config_dict") or {}
            for block in [{}, *settings]:
                config = Config(name, "ml-100k", config_dict={**given, **block})
                assert computable(config), (name, block, config["valid_metric"])
                for key, value in block.items():
                    assert config[key] == value, (name, key, config[key])
            hyper = hyper_lines(page)
            assert "learning_rate" in hyper, name
            for key, choices in hyper.items():
                for value in choices:
                    config = Config(name, "ml-100k", config_dict={**given, key: value})
                    assert config[key] == value, (name, key, value)
            report["hyper"] = sorted(hyper)
            if data_dir:
                from recbole.quick_start import run_recbole

                for block in [{}, *settings]:
                    sizes = {"data_path": data_dir, **RUN_SIZES}
                    result = run_recbole(
                        model=name,
                        dataset="ml-100k",
                        config_dict={**given, **block, **sizes},
                    )
                    report["runs"].append(
                        {
                            "block": block,
                            "best_valid_score": float(result["best_valid_score"]),
                            "test": {
                                k: float(v) for k, v in result["test_result"].items()
                            },
                        }
                    )
        out[name] = report
    assert "recbole_attn" not in sys.modules
    print(json.dumps(out))


if __name__ == "__main__":
    run = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--run" else None
    with open(sys.argv[1], encoding="utf-8") as f:
        main(json.load(f), run)
