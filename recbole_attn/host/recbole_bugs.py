"""RecBole 1.2.1's own bugs a run can reach, fixed (docs/environment.md lists each with
its issue); :func:`recbole_original` still reaches RecBole's code."""

import copy
import functools
import random

import numpy as np
import torch

from recbole_attn.errors import DataError

#: draws of a rejection-sampling loop after which it checks once whether anything is left
SAMPLING_ROUNDS = 100


def _no_negative_message(what, holder, count, fixes, hang=True):
    return (
        f"{what}: {holder} every one of the {count} items that can be drawn, so no "
        "negative item is left to draw"
        + (" (RecBole 1.2.1 draws forever here)" if hang else "")
        + f"; {fixes}"
    )


def mask_item_neg_sample(self, item_set, n_items):
    """RecBole's ``MaskItemSequence._neg_sample`` without its endless loop (#2193):
    with no item left, 0 for CE (never read), a :class:`DataError` for BPR."""
    item = random.randint(1, n_items - 1)
    draws = 1
    while item in item_set:
        if draws == SAMPLING_ROUNDS:
            held = {i for i in item_set if 0 < i < n_items}
            if len(held) >= n_items - 1:
                if self.config["loss_type"] != "BPR":
                    return 0  # never read: the CE loss has no sampled negatives
                raise DataError(
                    _no_negative_message(
                        "BERT4Rec with loss_type BPR draws a negative item for every "
                        "masked item",
                        "a training sequence holds",
                        n_items - 1,
                        "use loss_type CE, a MAX_ITEM_LIST_LENGTH below the number of "
                        "items, or drop repeated interactions (rm_dup_inter: first)",
                    )
                )
        item = random.randint(1, n_items - 1)
        draws += 1
    return item


def _sampler_support(sampler):
    """The values ``sampler`` draws (None: ``1 .. N - 1``) and N."""
    if sampler.distribution == "popularity":
        return set(sampler.prob), len(sampler.prob)
    size = getattr(sampler, "item_num", None) or getattr(sampler, "entity_num", 0)
    return None, size


def _exhausted_keys(sampler, keys):
    support, size = _sampler_support(sampler)
    full = []
    for key in sorted(set(int(k) for k in keys)):
        used = sampler.used_ids[key]
        if support is None:
            if sum(1 for v in used if 0 < v < size) >= size - 1:
                full.append(key)
        elif support <= set(used):
            full.append(key)
    return full


def _key_names(sampler, keys):
    datasets = getattr(sampler, "datasets", None)
    if datasets and getattr(sampler, "phase", None) is not None:
        dataset = datasets[0]
        try:
            return [str(t) for t in dataset.id2token(dataset.uid_field, keys)]
        except Exception:  # a RecBole Dataset without the token table
            pass
    return [str(k) for k in keys]


def _check_exhausted(sampler, keys):
    if full := _exhausted_keys(sampler, keys):
        names = _key_names(sampler, full[:3])
        more = f" (and {len(full) - 3} more)" if len(full) > 3 else ""
        _, size = _sampler_support(sampler)
        phase = getattr(sampler, "phase", None)
        raise DataError(
            _no_negative_message(
                f"RecBole's {sampler.distribution} negative sampler"
                + (f" ({phase} phase)" if phase else ""),
                f"{', '.join(names)}{more} already has",
                size if sampler.distribution == "popularity" else size - 1,
                "filter such users out (user_inter_num_interval), or draw from every "
                "item (train_neg_sample_args distribution uniform; a uni<N> or full "
                "evaluation)",
            )
        )


def sample_by_key_ids(self, key_ids, num):
    """RecBole's ``sample_by_key_ids``; keys with nothing left to draw: DataError."""
    key_ids = np.array(key_ids)
    key_num = len(key_ids)
    total_num = key_num * num
    rounds = 0
    if (key_ids == key_ids[0]).all():
        key_id = key_ids[0]
        used = np.array(list(self.used_ids[key_id]))
        value_ids = self.sampling(total_num)
        check_list = np.arange(total_num)[np.isin(value_ids, used)]
        while len(check_list) > 0:
            rounds += 1
            if rounds == SAMPLING_ROUNDS:
                _check_exhausted(self, [key_id])
            value_ids[check_list] = value = self.sampling(len(check_list))
            check_list = check_list[np.isin(value, used)]
    else:
        value_ids = np.zeros(total_num, dtype=np.int64)
        check_list = np.arange(total_num)
        key_ids = np.tile(key_ids, num)
        while len(check_list) > 0:
            rounds += 1
            if rounds == SAMPLING_ROUNDS:
                _check_exhausted(self, key_ids[check_list])
            value_ids[check_list] = self.sampling(len(check_list))
            used = self.used_ids[key_ids[check_list]]
            check_list = np.array(
                [
                    i
                    for i, u, v in zip(check_list, used, value_ids[check_list])
                    if v in u
                ]
            )
    return torch.tensor(value_ids, dtype=torch.long)


def sampler_used_ids(get_used_ids):
    """RecBole's ``Sampler.get_used_ids``; users with every item: DataError."""

    @functools.wraps(get_used_ids)
    def checked(self):
        try:
            return get_used_ids(self)
        except ValueError as err:
            if "interacted with all items" not in str(err):
                raise
        seen = {}
        for d in self.datasets:
            users, items = (
                d.inter_feat[f].tolist() for f in (self.uid_field, self.iid_field)
            )
            for u, i in zip(users, items):
                seen.setdefault(u, set()).add(i)
        full = sorted(u for u, s in seen.items() if len(s) + 1 >= self.item_num)
        names = [str(t) for t in self.datasets[0].id2token(self.uid_field, full[:3])]
        more = f" (and {len(full) - 3} more)" if len(full) > 3 else ""
        raise DataError(
            _no_negative_message(
                "RecBole's negative sampler draws items a user has not interacted with",
                f"user {', '.join(names)}{more} has interacted with",
                self.item_num - 1,
                f'filter such users out (--user_inter_num_interval="[0,'
                f'{self.item_num - 1})"), or train without sampled negatives',
                hang=False,
            )
        ) from None

    return checked


def pop_init(init):

    @functools.wraps(init)
    def __init__(self, config, dataset):
        init(self, config, dataset)
        sampling = config["train_neg_sample_args"] or {}
        self.sampled_label = (
            config["LABEL_FIELD"]
            if sampling.get("distribution", "none") != "none"
            else None
        )

    return __init__


def pop_calculate_loss(self, interaction):
    """RecBole's ``Pop.calculate_loss``, each training interaction counted once."""
    item = interaction[self.ITEM_ID]
    label = getattr(self, "sampled_label", None)
    if label is not None and label in interaction:
        item = item[interaction[label] > 0]
    ones = torch.ones_like(item, dtype=self.item_cnt.dtype).unsqueeze(1)
    self.item_cnt.scatter_add_(0, item.unsqueeze(1), ones)
    self.max_cnt = torch.max(self.item_cnt, dim=0)[0]
    return torch.nn.Parameter(torch.zeros(1)).to(self.device)


def collector_data_struct(get_data_struct):
    """RecBole's ``Collector.get_data_struct``, non-tensor values set aside."""

    @functools.wraps(get_data_struct)
    def data_struct(self):
        data = self.data_struct._data_dict
        others = {k: v for k, v in data.items() if not isinstance(v, torch.Tensor)}
        for key in others:
            del self.data_struct[key]
        try:
            returned = get_data_struct(self)
        finally:
            for key, value in others.items():
                self.data_struct.set(key, value)
        for key, value in others.items():
            returned.set(key, copy.deepcopy(value))
        return returned

    return data_struct


def _rebuild_generator(device, state):
    generator = torch.Generator(device=device)
    generator.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
    return generator


def reduce_generator(generator):
    """A ``torch.Generator`` pickled as device and state bytes (pytorch #146828)."""
    state = generator.get_state()
    return _rebuild_generator, (str(generator.device), state.numpy().tobytes())


def register_generator_pickling():
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(torch.Generator, reduce_generator)


#: (class, attribute) -> RecBole's own function, for each fix installed here
_ORIGINALS = {}


def recbole_original(cls, name):
    """RecBole's own ``cls.name`` before a fix of this module replaced it."""
    return _ORIGINALS.get((cls, name), getattr(cls, name))


def _replace(cls, name, value):
    _ORIGINALS.setdefault((cls, name), getattr(cls, name))
    setattr(cls, name, value)


def install_negative_sampling():
    from recbole.data.transform import MaskItemSequence
    from recbole.sampler.sampler import AbstractSampler, Sampler

    _replace(MaskItemSequence, "_neg_sample", mask_item_neg_sample)
    _replace(AbstractSampler, "sample_by_key_ids", sample_by_key_ids)
    _replace(Sampler, "get_used_ids", sampler_used_ids(Sampler.get_used_ids))


def install_pop_counts():
    from recbole.model.general_recommender.pop import Pop

    _replace(Pop, "__init__", pop_init(Pop.__init__))
    _replace(Pop, "calculate_loss", pop_calculate_loss)


def install_collector_values():
    from recbole.evaluator.collector import Collector

    _replace(
        Collector, "get_data_struct", collector_data_struct(Collector.get_data_struct)
    )
