"""Pipeline, training modes, checkpoints, resume, reproducibility and CLI (issue 2)."""

import os

import pytest
import torch

from conftest import raw_sequences
from recbole_attn.engine.checkpoint import load_checkpoint, save_checkpoint
from recbole_attn.errors import CheckpointError
from recbole_attn.data.dataset import last_sample_per_user
from recbole_attn.sequential.batching import training_targets
from recbole_attn.errors import UnknownModelError
from recbole_attn.plugin import get_model_class
from recbole_attn.engine.quick_start import build, load_data_and_model, run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_all_position_train_split_is_one_longest_prefix_per_user(tiny_config):
    config, net, _, (train, valid, test) = build(
        "SASRecAP", "tiny", config_dict=tiny_config
    )
    ds = train._dataset
    raw = raw_sequences(tiny_config["data_path"])
    inter = ds.inter_feat
    assert len(inter) == len(raw), "one training sample per user"
    max_len = config["MAX_ITEM_LIST_LENGTH"]
    for row in range(len(inter)):
        user = ds.id2token(ds.uid_field, inter[ds.uid_field][row].item())
        items = raw[user]
        length = inter[ds.item_list_length_field][row].item()
        seq = ds.id2token(ds.iid_field, inter[net.ITEM_SEQ][row][:length].numpy())
        target = ds.id2token(ds.iid_field, inter[ds.iid_field][row].item())
        # train prefix: everything but the validation and test items, cut to max_len
        assert list(seq) == items[:-3][-max_len:]
        assert target == items[-3]


def test_prefix_mode_keeps_recbole_split(tiny_config):
    config_dict = {**tiny_config, "training_mode": "last_position"}
    _, _, _, (train, _, _) = build("SASRecAP", "tiny", config_dict=config_dict)
    raw = raw_sequences(tiny_config["data_path"])
    assert len(train._dataset.inter_feat) == sum(len(s) - 3 for s in raw.values())


def test_last_sample_per_user():
    inter = {"u": torch.tensor([1, 1, 2, 1, 3, 3])}
    assert last_sample_per_user(inter, "u").tolist() == [3, 2, 5]


def test_training_targets_both_modes(tiny_config):
    _, net, _, _ = build("SASRecAP", "tiny", config_dict=tiny_config)
    seq = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    lengths = torch.tensor([3, 2])
    pos = torch.tensor([11, 12])
    targets, mask = training_targets(seq, lengths, pos, net.training_mode)
    assert targets.tolist() == [[6, 7, 11, 0], [9, 12, 0, 0]]
    assert mask.tolist() == [[True, True, True, False], [True, True, False, False]]
    net.training_mode = "last_position"
    targets, mask = training_targets(seq, lengths, pos, net.training_mode)
    assert targets[mask].tolist() == [11, 12]
    assert mask.sum().item() == 2 and mask[0, 2] and mask[1, 1]


def test_negatives_avoid_the_users_items(tiny_config):
    _, net, _, _ = build("STOSA", "tiny", config_dict=tiny_config)
    torch.manual_seed(0)
    seq = torch.arange(1, net.n_items - 2).repeat(64, 1)  # nearly every item is seen
    targets = seq.clone()
    neg = net.sample_negatives(seq, targets)
    allowed = {net.n_items - 2, net.n_items - 1}
    assert set(neg.unique().tolist()) == allowed
    # uniform over the two unseen items
    share = (neg == net.n_items - 1).float().mean().item()
    assert 0.4 < share < 0.6
    net.neg_exclude_seen = False
    plain = net.sample_negatives(seq, targets)
    assert not set(plain.unique().tolist()) <= allowed and plain.min() >= 1
    # a user who has seen everything still gets valid negatives
    net.neg_exclude_seen = True
    everything = torch.arange(1, net.n_items).repeat(2, 1)
    neg = net.sample_negatives(everything, everything)
    assert neg.min() >= 1 and neg.max() < net.n_items


def test_sasrec_ap_bce_loss_is_the_sasrec_papers(tiny_config):
    config, net, _, (train, _, _) = build(
        "SASRecAP", "tiny", config_dict={**tiny_config, "loss_type": "BCE"}
    )
    assert config["loss_type"] == "BCE" and net.loss_type == "BCE"
    assert net.needs_negatives
    net.eval()  # no dropout: the loss is a function of the drawn negatives only
    batch = next(iter(train))
    torch.manual_seed(3)
    loss = net.calculate_loss(batch)
    # recompute with the same negatives, by hand
    torch.manual_seed(3)
    seq_len = batch[net.ITEM_SEQ_LEN]
    seq = net.trim(batch[net.ITEM_SEQ], seq_len)
    targets, mask = training_targets(
        seq, seq_len, batch[net.POS_ITEM_ID], net.training_mode
    )
    out = net.encode(seq, seq_len)[mask]
    neg = net.sample_negatives(seq, targets)[mask]
    assert neg.shape == (int(mask.sum()), 1)  # neg_sample_num: 1
    neg = neg[:, 0]
    emb = net.item_embedding.weight
    pos_s, neg_s = (out * emb[targets[mask]]).sum(-1), (out * emb[neg]).sum(-1)
    expected = -(torch.log(torch.sigmoid(pos_s)) + torch.log(1 - torch.sigmoid(neg_s)))
    torch.testing.assert_close(loss, expected.mean())
    with pytest.raises(ValueError, match="loss_type"):
        build("SASRecAP", "tiny", config_dict={**tiny_config, "loss_type": "MSE"})


def _finite(result):
    return all(0.0 <= v <= 1.0 for v in result.values())


def test_end_to_end_checkpoint_reload_and_reproducibility(tiny_config):
    result = run("STOSA", "tiny", config_dict=tiny_config)
    assert _finite(result["test_result"]) and _finite(result["best_valid_result"])
    path = result["saved_model_file"]
    # the checkpoint holds plain data only
    state = torch.load(path, weights_only=True)
    assert state["model"] == "STOSA" and state["dataset"] == "tiny"
    # reload weights-only and evaluate again: identical test metrics
    config, net, trainer, (_, _, test_data) = load_data_and_model(path)
    again = trainer.evaluate(test_data, load_best_model=True, model_file=path)
    assert dict(again) == dict(result["test_result"])
    # same seed -> same metrics
    repeat = run("STOSA", "tiny", config_dict=tiny_config)
    assert dict(repeat["test_result"]) == dict(result["test_result"])


def test_resume_gives_the_uninterrupted_result(tiny_config):
    full = run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 3})
    first = run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1})
    last = first["saved_model_file"][: -len(".pth")] + "-last.pth"
    assert torch.load(last, weights_only=True)["epoch"] == 0
    resumed = run(
        "SASRecAP",
        "tiny",
        config_dict={**tiny_config, "epochs": 3},
        resume_checkpoint=last,
    )
    assert dict(resumed["best_valid_result"]) == dict(full["best_valid_result"])
    assert dict(resumed["test_result"]) == dict(full["test_result"])


def test_a_fit_closes_recboles_tensorboard_writer_when_it_ends_or_fails(
    tiny_config, monkeypatch
):
    """RecBole's Trainer never closes it: a failed run's writer thread flushed into a
    folder that might be gone (a test's, a read-only one) and raised there."""
    from recbole_attn.engine.trainer import AttnTrainer

    config, _, trainer, (train, valid, _) = build(
        "SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1}
    )
    trainer.fit(train, valid, saved=False)
    assert trainer.tensorboard.file_writer is None  # closed
    real = AttnTrainer._train_epoch

    def fails(self, *args, **kwargs):
        real(self, *args, **kwargs)  # something is written, then the run fails
        raise RuntimeError("disk full")

    monkeypatch.setattr(AttnTrainer, "_train_epoch", fails)
    with pytest.raises(RuntimeError, match="disk full"):
        trainer.fit(train, valid, saved=False)  # a closed writer reopens
    assert trainer.tensorboard.file_writer is None


def test_recbole_style_checkpoint_is_refused(tmp_path):
    from argparse import Namespace as NotPlain  # any pickled object, like a Config

    path = tmp_path / "recbole.pth"
    torch.save({"config": NotPlain(), "state_dict": {}}, path)
    with pytest.raises(CheckpointError, match="pickled Python objects"):
        load_checkpoint(path)
    with pytest.raises(TypeError):
        save_checkpoint({"state_dict": {}, "config": NotPlain()}, tmp_path / "x.pth")
    assert not (tmp_path / "x.pth").exists()


def test_model_resolution():
    from recbole.model.sequential_recommender import SASRec

    from recbole_attn.plugin import STOSA

    assert get_model_class("STOSA") is STOSA
    assert get_model_class("SASRec") is SASRec
    with pytest.raises(UnknownModelError, match="STOSA"):
        get_model_class("NoSuchModel")


def _cli_main(args, capsys):
    """The CLI's main() in-process (the error paths need no subprocess)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "run_recbole_attn", os.path.join(REPO, "run_recbole_attn.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        code = module.main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    return code, capsys.readouterr().err


def test_cli_unknown_model(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(["--model=NoSuchModel", "--dataset=ml-100k"], capsys)
    assert code == 2
    assert "unknown model 'NoSuchModel'" in err and "STOSA" in err


def test_cli_missing_dataset(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["pytest", "--data_path=elsewhere"])  # not read
    code, err = _cli_main(
        ["--model=STOSA", "--dataset=Office", "--data_path=nowhere"], capsys
    )
    assert code == 2
    assert "Office.inter" in err
    assert os.path.join("nowhere", "Office") in err
    assert (
        "recbole-attn convert seqfile --sequences <path/to/Office_Products.txt>" in err
    )
    assert not os.path.exists(tmp_path / "saved"), "nothing trained"


@pytest.mark.parametrize(
    "model, override, message",
    [
        ("PAtt", "--dpp_k=4", "dpp_k must be one of [2, 3] (2: PAtt^2, pairs"),
        ("SASRecAP", "--loss_type=MSE", "loss_type"),
        ("STOSA", "--loss_type=CCE", "loss_type must be one of ['BCE', 'BPR', 'SSM',"),
        ("PAtt", "--neg_sample_num=0", "neg_sample_num must be an integer >= 1"),
        ("RKSA", "--neg_sample_distribution=zipf", "neg_sample_distribution must be"),
        ("SASRecAP", "--training_mode=every_position", "training_mode must be"),
        ("PAtt", "--dpp_k=3 --MAX_ITEM_LIST_LENGTH=2", "raise MAX_ITEM_LIST_LENGTH"),
        ("DPAtt", "--dataset=tiny_nocat", "DPAtt needs the item category field"),
        ("PAtt", "--dpp_triple_samples=4", "only dpp_k: 3 has"),
        ("RKSA", "--kernels=['count','cooc']", "kernels must be a non-empty list"),
        ("AWRSR", "--refinement=stoc", "use it with backbone: STOSA"),
        ("FPARec", "--positional_pattern=linear", "use PARec for fixed patterns"),
        ("SASRec", "--training_mode=all_position", "not a recbole_attn model"),
        ("SASRecAP", "--position_alignment=right", "position_alignment must be"),
    ],
)
def test_cli_bad_model_config_is_a_clear_error(
    tiny_data_path, tmp_path, monkeypatch, capsys, model, override, message
):
    """Invalid hyper-parameters: exit 2 with the message, no stack trace."""
    monkeypatch.chdir(tmp_path)
    args = [f"--model={model}", f"--data_path={tiny_data_path}", "--epochs=1"]
    args += override.split()
    if not override.startswith("--dataset"):
        args.append("--dataset=tiny")
    code, err = _cli_main(args, capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_cli_bad_override_syntax(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(["--model=STOSA", "--epochs", "2"], capsys)
    assert code == 2 and "--key=value" in err
    code, err = _cli_main(["--model=STOSA", "--epochs=2", "--epochs=3"], capsys)
    assert code == 2 and "--epochs is given twice" in err


def test_recbole_anomaly_detection_is_switched_off():
    """RecBole 1.2.1's sine.py enables autograd anomaly detection on import (slow)."""
    import recbole_attn  # noqa: F401
    from recbole_attn.host.compat import undo_recbole_anomaly_detection

    assert not torch.is_anomaly_enabled()
    torch.autograd.set_detect_anomaly(True)  # what `import recbole.model` did
    try:
        assert undo_recbole_anomaly_detection() is True
        assert not torch.is_anomaly_enabled()
        assert undo_recbole_anomaly_detection() is False
    finally:
        torch.autograd.set_detect_anomaly(False)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"valid_metric": "MRR@20", "metrics": ["Recall", "NDCG"]}, "not computed"),
        ({"valid_metric": "NDCG@20", "topk": [5, 10]}, "cutoff 20"),
    ],
)
def test_valid_metric_checked_before_training(
    tiny_config, tmp_path, overrides, message
):
    from recbole_attn.errors import MetricConfigError

    with pytest.raises(MetricConfigError, match=message):
        run("STOSA", "tiny", config_dict={**tiny_config, **overrides})
    assert not os.path.exists(tmp_path / "saved")
