"""RecBole's own files that the export extends (the models' imports, the cases of
``test_model_auto.py``, ``model_list.json``, the docs' model list), each edit adding our
lines once; and a model's docs page and pull-request description."""

import inspect
import json
import re
import textwrap

import yaml

from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS, SEQUENTIAL


def case_names(name):
    return [f"test_{name.lower()}" + (f"_{s}" if s else "") for s in MODELS[name].cases]


def recbole_test_methods(names):
    """``{method: text}``: RecBole's test methods of ``names``, one a model and case."""
    out = {}
    for name in names:
        model = MODELS[name]
        for method, (suffix, options) in zip(case_names(name), model.cases.items()):
            config = {"model": name, **options, **model.sizes.get(suffix, {})}
            lines = "".join(f"            {k!r}: {v!r},\n" for k, v in config.items())
            out[method] = (
                f"    def {method}(self):\n        config_dict = {{\n{lines}        }}\n"
                "        quick_test(config_dict)\n"
            ).replace("'", '"')
    return out


def recbole_test_cases(names):
    return "\n".join(recbole_test_methods(names).values())


def _method_span(text, method, start, end):
    """``(begin, stop)`` of ``method`` in ``text[start:end]``, or None."""
    match = re.compile(rf"^    def {method}\(self\):\n", re.M).search(text, start, end)
    if match is None:
        return None
    following = re.compile(r"^(    \S|\S)", re.M).search(text, match.end(), end)
    stop = following.start() if following else end
    return match.start(), len(text[:stop].rstrip("\n")) + 1


def _class_end(text, start):
    following = re.compile(r"^(class |if __name__)", re.M).search(text, start)
    return following.start() if following else len(text)


def add_test_cases(text, names, earlier=None):
    """``(text, methods)``: test_model_auto.py with the cases of ``names`` in
    ``TestSequentialRecommender``, and the methods. A case as an earlier export wrote it
    (``earlier``: ``{method: text}``) is replaced; another of that name is refused."""
    methods = recbole_test_methods(names)
    match = re.search(r"^class TestSequentialRecommender\b.*$", text, re.M)
    if match is None:
        raise ExportError(
            "tests/model/test_model_auto.py has no class TestSequentialRecommender: is "
            "--recbole_dir a RecBole checkout?"
        )
    new = []
    for method, case in methods.items():
        span = _method_span(text, method, match.end(), _class_end(text, match.end()))
        current = span and text[span[0] : span[1]]
        if span is None:
            new.append(case)
        elif current != case and current != (earlier or {}).get(method):
            raise ExportError(
                f"tests/model/test_model_auto.py: {method} differs from what the export "
                "writes (edited by hand?); remove it or leave that model out of --models"
            )
        else:
            text = text[: span[0]] + case + text[span[1] :]
    if new:
        end = _class_end(text, match.end())
        body = text[:end].rstrip("\n") + "\n\n"
        text = body + "\n".join(new) + "\n\n" + text[end:].lstrip("\n")
    return text, methods


def add_init_lines(text, names):
    """``sequential_recommender/__init__.py`` with the imports of ``names`` it lacks."""
    lines = []
    for name in names:
        line = f"from {SEQUENTIAL}.{name.lower()} import {name}\n"
        if line in text:
            continue
        if re.search(rf"\bimport .*\b{name}\b", text):
            raise ExportError(
                f"recbole/model/sequential_recommender/__init__.py imports {name} in "
                f"another form than {line.strip()!r} (edited by hand?); make it that line"
            )
        lines.append(line)
    return text.rstrip("\n") + "\n" + "".join(lines) if lines else text


def model_list_entry(name, keys_at=8):
    """The entry of ``name``: its brace at 6 spaces, its keys at ``keys_at``."""
    model = MODELS[name]
    entry = {
        "category": "Sequential Recommendation",
        "cate_link": "/docs/user_guide/model_intro.html#sequential-recommendation",
        "year": model.year,
        "pub": model.pub,
        "model": name,
        "model_link": f"/docs/user_guide/model/sequential/{name.lower()}.html",
        "paper": model.paper,
        "paper_link": model.paper_link,
        "authors": model.authors,
        "ref_code": model.ref_code,
        "repository": "RecBole",
        "repo_link": "https://github.com/RUCAIBox/RecBole",
    }
    text = json.dumps(entry, indent=keys_at - 6, ensure_ascii=False)
    return textwrap.indent(text, " " * 6)


def _last_entry_indent(text):
    """The indent of the keys of the file's last entry (RecBole's later entries: 8)."""
    found = re.findall(r'^( *)"category":', text, re.M)
    return len(found[-1]) if found else 8


def add_model_list_entries(text, names):
    """``asset/model_list.json`` with the entries of ``names`` it lacks, at its end."""
    present = {e.get("model") for e in json.loads(text)["data"]}
    keys_at = _last_entry_indent(text)
    new = [model_list_entry(n, keys_at) for n in names if n not in present]
    if not new:
        return text
    end = text.rstrip().rstrip("}").rstrip().rstrip("]").rstrip()
    out = end + ",\n" + ",\n".join(new) + text[len(end) :]
    json.loads(out)
    return out


def add_docs_lines(text, names):
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("   model/sequential/")]
    if not at:
        raise ExportError(
            "docs/source/user_guide/model_intro.rst lists no sequential model"
        )
    new = [docs_line(n) for n in names]
    new = [line for line in new if line not in lines]
    return "".join(lines[: at[-1] + 1] + new + lines[at[-1] + 1 :])


#: the sentences of RecBole's README and docs that count its models (its model pull
#: requests raise them); path -> patterns of the number
MODEL_COUNTS = {
    "README.md": (
        r"(Our library includes )(\d+)( recommendation algorithms)",
        r"(We implement )(\d+)( commonly used recommendation algorithms)",
    ),
    "README_CN.md": (
        r"(我们实现了)(\d+)(个推荐系统模型)",
        r"(我们实现了)(\d+)(个常用的推荐算法)",
    ),
    "docs/source/index.rst": (
        r"(our library includes )(\d+)( recommendation algorithms)",
        r"(We implement )(\d+)( commonly used recommendation algorithms)",
    ),
    "docs/source/user_guide/model_intro.rst": (
        r"(We implement )(\d+)( recommendation models)",
    ),
}


def docs_line(name):
    return f"   model/sequential/{name.lower()}\n"


def new_models(model_intro, names):
    """The models of ``names`` that ``model_intro.rst`` does not list yet: those a
    pull request adds to RecBole's count of its models."""
    lines = (model_intro or "").splitlines(keepends=True)
    return [n for n in names if docs_line(n) not in lines]


def add_to_model_counts(text, added, path="the file"):
    """``text`` with RecBole's count of its models raised by ``added``."""
    for pattern in MODEL_COUNTS[path]:
        text, found = re.subn(
            pattern, lambda m: f"{m[1]}{int(m[2]) + added}{m[3]}", text, count=1
        )
        if not found and added:
            raise ExportError(
                f"{path} no longer counts RecBole's models as {pattern!r}: RecBole "
                "changed it; raise its count by hand"
            )
    return text


#: RecBole's files that get our lines: path -> edit(text, names); and the test cases
EDITS = {
    "recbole/model/sequential_recommender/__init__.py": add_init_lines,
    "asset/model_list.json": add_model_list_entries,
    "docs/source/user_guide/model_intro.rst": add_docs_lines,
}
TEST_CASES = "tests/model/test_model_auto.py"


def _docstring_parts(name):
    """(description, NOTE) of the model's class docstring, dedented."""
    from recbole_attn.plugin import get_model_class

    doc = inspect.cleandoc(get_model_class(name).__doc__ or "")
    description, _, note = doc.partition("NOTE:")
    return description.strip(), inspect.cleandoc(note) if note else ""


def _yaml_literal(value):
    return yaml.safe_dump({"v": value}, default_flow_style=True)[4:-2]


def _yaml_block(values):
    lines = "".join(f"   {k}: {_yaml_literal(v)}\n" for k, v in values.items())
    return ".. code:: yaml\n\n" + lines


#: the ``hyper.test`` choices of every model, for the keys its yaml has (SASRec's page's)
HYPER = {
    "learning_rate": [0.01, 0.005, 0.001, 0.0005, 0.0001],
    "hidden_dropout_prob": [0.2, 0.5],
    "attn_dropout_prob": [0.2, 0.5],
    "n_heads": [1, 2],
    "n_layers": [1, 2, 3],
}


def hyper_choices(name, values):
    """``{key: choices}`` of the docs page's ``hyper.test``: every model's keys that the
    yaml ``values`` has (each with its default among the choices), then the model's."""
    out = {}
    for key, choices in HYPER.items():
        if key == "learning_rate" or key in values:
            default = values.get(key)
            extra = [] if default is None or default in choices else [default]
            out[key] = sorted([*choices, *extra])
    if "learning_rate" in out:  # as SASRec's page lists them
        out["learning_rate"] = sorted(out["learning_rate"], reverse=True)
    return {**out, **MODELS[name].hyper}


def _hyper_text(choices):
    def literal(value):
        return "[" + ",".join(repr(v) for v in value) + "]"

    return "".join(f"   {k} choice {literal(v)}\n" for k, v in choices.items())


def _settings_keys(keys):
    return ", ".join(f"``{k}``" for k in keys)


def settings_text(name, files):
    """The docs page's settings a model yaml cannot hold (T, the training budget), and
    the defaults RecBole ignores of the model whose file it runs (AWRSR: STOSA's)."""
    from recbole_attn.upstream.models import RECBOLE_NEGATIVES
    from recbole_attn.upstream.yaml_files import exported_keys, reproduction_settings

    out = []
    settings = reproduction_settings(name)
    if settings:
        length = "MAX_ITEM_LIST_LENGTH"
        others = [k for k in settings if k != length]
        why = []
        if length in settings:
            why.append(
                f"RecBole reads ``{length}`` from "
                "``recbole/properties/dataset/sample.yaml`` (``50``) after the model's "
                "yaml, so a model's yaml cannot set it"
            )
        if others:
            why.append(
                f"{_settings_keys(others)} {'is' if len(others) == 1 else 'are'} "
                "training and evaluation settings of ``overall.yaml``, which RecBole's "
                "model yaml files leave to the user"
            )
        topk = (
            " ``topk`` holds the K of ``valid_metric``: RecBole validates at the K of "
            "``topk`` alone."
            if "topk" in settings
            else ""
        )
        out.append(
            f"**Reproduction settings:** {name} was reproduced with the settings "
            f"below, which its yaml does not hold: {'; '.join(why)}. To train as it "
            "was reproduced, set them in your own config file (or ``config_dict``)."
            f"{topk}\n\n" + _yaml_block(settings)
        )
    own = exported_keys(name, files)
    for other in MODELS[name].also_reads:
        theirs = exported_keys(other, files)
        differ = {k: v for k, v in theirs.items() if k in own and own[k] != v}
        if "train_neg_sample_args" in own and theirs.get("loss_type") != "CE":
            differ["train_neg_sample_args"] = RECBOLE_NEGATIVES
        if differ:
            out.append(
                f"**On the {other} backbone:** RecBole reads only ``{name}.yaml`` for "
                f"{name}, whatever its backbone, so its values above apply to "
                f"``backbone: '{other}'`` too. {other}'s own defaults differ in:\n\n"
                + _yaml_block(differ)
            )
    return "\n".join(out)


def _python_dict(values, indent="   "):
    """``values`` as the pages' ``parameter_dict`` (one key a line)."""
    lines = "".join(f"{indent}   {k!r}: {v!r},\n" for k, v in values.items())
    return f"{indent}parameter_dict = {{\n{lines}{indent}}}\n"


def running_example(name):
    """The page's ``run.py``: ``run_recbole`` on ml-100k, with the model's
    ``config_dict`` where it needs one (DPAtt: the category field)."""
    example = MODELS[name].example
    call = f"run_recbole(model='{name}', dataset='ml-100k'"
    if not example:
        return f"   {call})\n"
    return _python_dict(example) + f"   {call}, config_dict=parameter_dict)\n"


#: the closing links of RecBole's model pages
CLOSING = """\
If you want to change parameters, dataset or evaluation settings, take a look at

- :doc:`../../../user_guide/config_settings`
- :doc:`../../../user_guide/data_intro`
- :doc:`../../../user_guide/train_eval_intro`
- :doc:`../../../user_guide/usage`
"""


def tuning_text(name, values):
    """The page's "Tuning Hyper Parameters" section, as RecBole's model pages have it."""
    example = MODELS[name].example
    config = (
        f"{name} needs the ``parameter_dict`` above there too: write it into the "
        "config file of ``--config_files``:\n\n" + _yaml_block(example) + "\n"
        if example
        else ""
    )
    return (
        "Tuning Hyper Parameters\n-------------------------\n\n"
        "If you want to use ``HyperTuning`` to tune hyper parameters of this model, you "
        "can copy the following settings and name it as ``hyper.test``.\n\n"
        ".. code:: bash\n\n" + _hyper_text(hyper_choices(name, values)) + "\n"
        "Note that we just provide these hyper parameter ranges for reference only, and "
        "we can not guarantee that they are the optimal range of this model.\n\n"
        "Then, with the source code of RecBole (you can download it from GitHub), you "
        "can run the ``run_hyper.py`` to tuning:\n\n"
        ".. code:: bash\n\n"
        "   python run_hyper.py --model=[model_name] --dataset=[dataset_name] "
        "--config_files=[config_files_path] --params_file=hyper.test\n\n"
        + config
        + "For more details about Parameter Tuning, refer to "
        ":doc:`../../../user_guide/usage/parameter_tuning`.\n\n\n" + CLOSING
    )


def docs_page(name, yaml_text, files=None):
    """The docs page of model ``name``, as RecBole writes its models' pages."""
    from recbole_attn.upstream.sources import python_files

    model, values, params = MODELS[name], yaml.safe_load(yaml_text), []
    description, note = _docstring_parts(name)
    for line in yaml_text.splitlines():
        match = re.match(r"(\w+):[^#]*(?:#\s*(?:\((\w+)\)\s*)?(.*))?$", line)
        if match:
            key, kind, meaning = match.groups()
            kind = f" ({kind})" if kind else ""
            value = values[key]
            shown = "None" if value is None else _yaml_literal(value)
            params.append(
                f"- ``{key}{kind}`` : {meaning or ''} Defaults to ``{shown}``."
            )
    link = f"`[paper] <{model.paper_link}>`_\n\n" if model.paper_link else ""
    code = f"**Reference code:** {model.ref_code}\n\n" if model.ref_code else ""
    settings = settings_text(name, files or python_files())
    return (
        f"{name}\n{'=' * max(len(name), 11)}\n\n"
        f"Introduction\n---------------------\n\n{link}"
        f"**Title:** {model.paper}\n\n**Authors:** {model.authors}\n\n{code}"
        f"{description}\n\n"
        + (f"**Notes:**\n\n{note}\n\n" if note else "")
        + "Running with RecBole\n-------------------------\n\n"
        "**Model Hyper-Parameters:**\n\n"
        + "\n".join(params)
        + "\n\n"
        + (settings + "\n" if settings else "")
        + "**A Running Example:**\n\n"
        "Write the following code to a python file, such as `run.py`\n\n"
        ".. code:: python\n\n   from recbole.quick_start import run_recbole\n\n"
        + running_example(name)
        + "\nAnd then:\n\n.. code:: bash\n\n   python run.py\n\n"
        + tuning_text(name, values)
    )


def training_text(name):
    from recbole_attn.upstream.sources import python_files
    from recbole_attn.upstream.yaml_files import accepted_losses

    losses = accepted_losses(name, python_files())
    sampled = [loss for loss in losses if loss != "CE"]
    how = (
        f"`loss_type: {sampled[0]}` on the negatives of RecBole's sampler "
        "(`train_neg_sample_args`) or `CE`"
        if sampled
        else "`loss_type: CE`"
    )
    return (
        "The model trains as RecBole's SASRec: one sample per prefix, the loss at its "
        f"last position, with {how}."
    )


#: RecBole's own files in short, as the edits meet them: they add the same lines here
_SHAPES = {
    "recbole/model/sequential_recommender/__init__.py": (
        f"from {SEQUENTIAL}.sasrec import SASRec\n"
    ),
    "tests/model/test_model_auto.py": (
        "class TestSequentialRecommender(unittest.TestCase):\n"
        "    def test_sasrec(self):\n        quick_test({})\n\n\n"
        "class TestKnowledgeRecommender(unittest.TestCase):\n    pass\n"
    ),
    "asset/model_list.json": (
        '{\n  "data": [\n      {\n        "model": "SASRec"\n      }\n  ]\n}'
    ),
    "docs/source/user_guide/model_intro.rst": "   model/sequential/sasrec\n\nNext\n",
}


def added_lines(before, after):
    """``(added, removed)`` lines, as ``git diff`` counts them."""
    import difflib

    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return sum(d[:2] == "+ " for d in diff), sum(d[:2] == "- " for d in diff)


def recbole_edits(names):
    """``{path: (added, removed)}``: the lines a pull request of ``names`` adds."""
    edit = {**EDITS, TEST_CASES: lambda text, names: add_test_cases(text, names)[0]}
    out = {p: added_lines(t, edit[p](t, names)) for p, t in _SHAPES.items()}
    for path, (added, removed) in count_edits(_COUNT_SHAPES, names).items():
        before = out.get(path, (0, 0))
        out[path] = (before[0] + added, before[1] + removed)
    return out


def count_edits(texts, names):
    """``{path: (added, removed)}`` of the count sentences in ``texts`` (path ->
    text) that a pull request of ``names`` raises."""
    added = len(names)
    return {
        p: added_lines(t, add_to_model_counts(t, added, p)) for p, t in texts.items()
    }


#: RecBole's count sentences in short, one a line as in its files
_COUNT_SHAPES = {
    "README.md": "Our library includes 94 recommendation algorithms, covering\n"
    "+ We implement 94 commonly used recommendation algorithms, and\n",
    "README_CN.md": "我们实现了94个推荐系统模型，\n我们实现了94个常用的推荐算法，\n",
    "docs/source/index.rst": "our library includes 94 recommendation algorithms\n"
    "We implement 94 commonly used recommendation algorithms\n",
    "docs/source/user_guide/model_intro.rst": "We implement 94 recommendation models\n",
}


def table(new, edits):
    """A pull request's files: the new ones, then RecBole's, with their lines."""
    rows = ["| file | lines |", "|---|---|"]
    for path, text in new.items():
        rows.append(f"| `{path}` (new) | {text.count(chr(10))} |")
    for path, (added, removed) in edits.items():
        changed = f", {removed} changed" if removed else ""
        rows.append(f"| `{path}` | +{added - removed}{changed} |")
    return "\n".join(rows)


def pr_description(name, files, measured=None, dependencies=()):
    """The pull request of ``name``: ``files`` those written whole (``dependencies``'
    too), ``measured`` a markdown section or None."""
    model = MODELS[name]
    description, note = _docstring_parts(name)
    tests = "\n".join(f"- `{c}`" for c in case_names(name))
    needs = (
        "\n## Depends on\n\n"
        + ", ".join(f"{d} (`{SEQUENTIAL}.{d.lower()}`)" for d in dependencies)
        + f": {name}'s file imports it; this pull request includes its files.\n"
        if dependencies
        else ""
    )
    return (
        f"# Add {name} ({model.paper})\n\n"
        f"Paper: {model.paper} ({model.authors}"
        + (f", {model.pub}" if model.pub else ", venue and year: to fill in")
        + f") {model.paper_link}\n"
        + (f"Reference code: {model.ref_code}\n" if model.ref_code else "")
        + needs
        + f"\n## What is implemented\n\n{description}\n\n"
        f"## Deviations from the paper\n\n{note or 'None.'}\n\n"
        "## Training\n\n"
        f"{training_text(name)}\n\n"
        f"## Files\n\n{table(files, recbole_edits([*dependencies, name]))}\n\n"
        f"## Tests\n\nAdded to `tests/model/test_model_auto.py`:\n\n{tests}\n"
        + ("\n" + measured.rstrip("\n") + "\n" if measured else "")
        + (f"\n## Note\n\n{model.notes}\n" if model.notes else "")
    )
