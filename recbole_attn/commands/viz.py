"""
Attention heatmaps of one user of a saved model (STOSA Fig. 5, AWRSR Fig. 3): every layer
and head over the user's last test inputs, items on the axes; a refiner's ``A`` and ``B``
side by side. RecBole's SASRec is drawn through SASRecAP. Needs matplotlib (``.[plot]``).
"""

import io
import os
import re
import sys

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import refuse_existing, write_files


def _matplotlib():
    """matplotlib's pyplot (no display); without matplotlib, an error saying how."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RecboleAttnError(
            'attention heatmaps need matplotlib: uv pip install -e ".[plot]" '
            "(or pip install matplotlib)"
        ) from None
    return plt


def _attention_model(config, model, dataset):
    """``model``, or for RecBole's SASRec the SASRecAP with its weights."""
    if hasattr(model, "attention_weights"):
        return model
    if type(model).__name__ != "SASRec":
        raise RecboleAttnError(
            f"{type(model).__name__} has no attention matrices to draw; recbole_attn's "
            "models and RecBole's SASRec have"
        )
    from recbole_attn.plugin.sasrecap import SHARED_OPTIONS, SASRecAP
    from recbole_attn.options.declared import declared_options
    from recbole_attn.engine.config import make_config

    # the architecture of the RecBole SASRec: SASRecAP's layer options (its own
    # declarations, the loss aside) and the sequence length
    overrides = {
        k: config[k]
        for k in declared_options(SASRecAP)
        if (k in SHARED_OPTIONS or k == "hidden_act") and k != "loss_type"
    }
    overrides["MAX_ITEM_LIST_LENGTH"] = config["MAX_ITEM_LIST_LENGTH"]
    overrides.update(data_path=config["data_path"], training_mode="all_position")
    twin = SASRecAP(
        make_config("SASRecAP", config["dataset"], None, overrides), dataset
    )
    twin.load_state_dict(model.state_dict())
    return twin.to(model.device if hasattr(model, "device") else "cpu")


def _user_row(test_data, user):
    """The test interaction of the user with token ``user`` (one row)."""
    dataset = test_data._dataset
    field = dataset.uid_field
    try:
        uid = dataset.token2id(field, str(user))
    except ValueError:
        raise RecboleAttnError(
            f"user {user!r} is not in the dataset (tokens look like "
            f"{', '.join(map(str, dataset.id2token(field, [1, 2, 3])))})"
        ) from None
    rows = (dataset.inter_feat[field] == int(uid)).nonzero().flatten()
    if len(rows) == 0:
        raise RecboleAttnError(f"user {user!r} has no test interaction")
    return dataset.inter_feat[rows[-1:]]


def _labels(dataset, item_ids, label_field):
    """The axis labels of ``item_ids``: their tokens, or their ``label_field``."""
    tokens = dataset.id2token(dataset.iid_field, item_ids)
    if not label_field:
        return [str(t) for t in tokens]
    feat = dataset.item_feat
    if feat is None or label_field not in feat:
        raise RecboleAttnError(
            f"label_field {label_field!r} is not an item field of the dataset; load it "
            "with load_col (item: [item_id, ...]) or leave it out for item ids"
        )
    values = feat[label_field][item_ids]
    if dataset.field2type[label_field].value in ("token", "token_seq"):
        values = values.reshape(len(item_ids), -1)[:, 0]
        return [str(t) for t in dataset.id2token(label_field, values)]
    return [str(v.item()) for v in values]


def attention_maps(model_file, user, positions=15, label_field=None, config_dict=None):
    """The attention matrices of ``user`` (a token) for a saved model: ``model``,
    ``user``, ``labels`` (the last ``positions`` inputs) and ``maps``: ``{"A": [layer]
    [head] P x P}``, with a refiner ``A`` before it and ``B`` after."""
    from recbole_attn.engine.quick_start import load_data_and_model

    config, model, _, (train_data, _, test_data) = load_data_and_model(
        model_file, config_dict
    )
    net = _attention_model(config, model, train_data._dataset)
    net.eval()
    row = _user_row(test_data, user).to(config["device"])
    length = int(row[net.ITEM_SEQ_LEN][0])
    keep = slice(max(0, length - positions), length)
    maps = {}
    refined = net.attention_weights(row, refined=True)
    try:
        maps["A"] = net.attention_weights(row, refined=False)
        maps["B"] = refined
    except ValueError:  # no refiner
        maps["A"] = refined
    maps = {
        name: [layer[0, :, keep, keep].detach().cpu().numpy() for layer in layers]
        for name, layers in maps.items()
    }
    items = row[net.ITEM_SEQ][0, keep].cpu().numpy()
    return {
        "model": config["model"],
        "user": str(user),
        "labels": _labels(train_data._dataset, items, label_field),
        "maps": maps,
    }


def plot_attention(
    model_file,
    user,
    output,
    positions=15,
    label_field=None,
    config_dict=None,
    overwrite=False,
):
    """Write one PNG per layer and head (``A`` and ``B`` side by side for refined models)
    into the folder ``output``, named ``<checkpoint>_user<u>_layer<l>_head<h>.png``;
    existing files are replaced only with ``overwrite``. Returns the paths."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise RecboleAttnError(
            f"--output {output} is a file; the heatmaps go into a folder: give a folder"
        )
    plt = _matplotlib()
    result = attention_maps(model_file, user, positions, label_field, config_dict)
    files = _heatmap_files(model_file, result, output)
    refuse_existing(files.values(), "the heatmaps", overwrite)
    # drawn first, then published together: a stopped run leaves none of them
    drawn = {path: _draw(plt, result, *key) for key, path in files.items()}
    write_files(drawn, "the heatmaps", overwrite)
    return list(files.values())


def _heatmap_files(model_file, result, output):
    """``{(layer, head): path}`` of the PNG files, in drawing order."""
    stem = os.path.splitext(os.path.basename(str(model_file)))[0]
    # a token is the dataset's text: '/', '..' or spaces must not make a path of it
    user_part = re.sub(r"[^A-Za-z0-9_.-]", "_", str(result["user"])).strip(".") or "_"
    return {
        (layer, head): os.path.join(
            output, f"{stem}_user{user_part}_layer{layer + 1}_head{head + 1}.png"
        )
        for layer, heads in enumerate(result["maps"]["A"])
        for head in range(heads.shape[0])
    }


def _draw(plt, result, layer, head):
    """One layer's and head's heatmap (each map side by side): its PNG's bytes."""
    labels, maps = result["labels"], result["maps"]
    size = 1.0 + 0.35 * len(labels)
    fig, axes = plt.subplots(
        1, len(maps), figsize=(size * len(maps) + 1.5, size), squeeze=False
    )
    for ax, name in zip(axes[0], maps):
        matrix = maps[name][layer][head]
        image = ax.imshow(matrix, cmap="Blues", vmin=0.0, vmax=float(matrix.max()))
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlabel("key item")
        ax.set_ylabel("query item")
        title = f"{result['model']} user {result['user']}: layer {layer + 1}"
        title += f", head {head + 1}"
        if len(maps) > 1:
            title += f" ({name})"
        ax.set_title(title, fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()


def add_arguments(parser):
    """The model, the user, the folder and what is drawn."""
    from recbole_attn.options.arguments import checked

    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run, or a folder: its newest",
    )
    parser.add_argument("--user", required=True, help="the dataset's user token")
    parser.add_argument("--output", default="attention_plots", help="PNG folder")
    parser.add_argument(
        "--positions",
        type=checked(
            int,
            lambda n: n >= 1,
            "positions must be an integer >= 1 (the user's last inputs drawn), got "
            "{value}",
        ),
        default=15,
        help="last positions drawn (default 15)",
    )
    parser.add_argument(
        "--label_field", help="item field for the axis labels (default: ids)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace heatmaps already in --output"
    )


def run(args):
    """Draw the heatmaps and print their paths (of a folder: its newest checkpoint, as
    the other commands take it)."""
    from recbole_attn.commands.evaluate import newest_model_file

    paths = plot_attention(
        newest_model_file(args.model_file),
        args.user,
        args.output,
        args.positions,
        args.label_field,
        overwrite=args.overwrite,
    )
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    from recbole_attn.options.arguments import command_main

    sys.exit(command_main(sys.modules[__name__], prog=f"python -m {__spec__.name}"))
