"""The run's CPU threads (``threads``, recbole_attn.engine.threads): the idle cores read from
/proc/stat, the rule between 1 and torch's default, the key's override and its check."""

import pytest
import torch

from recbole_attn.errors import ConfigError
from recbole_attn.engine.quick_start import build
from recbole_attn.engine.threads import choose_threads, cpu_times, idle_cores

#: /proc/stat's format: user nice system idle iowait irq softirq steal guest guest_nice
STAT = """cpu  {a} 0 0 {b} 0 0 0 0 0 0
cpu0 {c0} 0 0 {i0} {w0} 0 0 0 7 0
cpu1 {c1} 0 0 {i1} 0 0 0 0 0 0
cpu2 500 0 0 500 0 0 0 0 0 0
intr 12345 0 0
"""


def stat(c0, i0, w0, c1, i1):
    return STAT.format(a=c0 + c1, b=i0 + i1, c0=c0, i0=i0, w0=w0, c1=c1, i1=i1)


def test_cpu_times_sum_the_given_cores_idle_with_iowait_guest_not_twice():
    text = stat(100, 50, 5, 30, 70)
    assert cpu_times(text, {0}) == (55, 155)
    assert cpu_times(text, {0, 1}) == (125, 255)
    assert cpu_times(text, {2}) == (500, 1000)
    assert cpu_times(text, {7}) == (0, 0)


def test_idle_cores_over_the_interval(monkeypatch):
    # cpu0: 100 busy + 0 idle ticks over the interval; cpu1: 25 busy + 75 idle
    texts = iter([stat(100, 50, 5, 30, 70), stat(200, 50, 5, 55, 145)])
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    slept = []
    got = idle_cores(read=lambda: next(texts), sleep=slept.append, interval=0.3)
    assert slept == [0.3]
    assert got == pytest.approx(2 * 75 / 200)


def test_idle_cores_is_none_where_the_system_cannot_tell():
    def unreadable():
        raise OSError("no /proc")

    assert idle_cores(read=unreadable, sleep=lambda s: None) is None
    same = stat(1, 1, 1, 1, 1)
    assert idle_cores(read=lambda: same, sleep=lambda s: None) is None


@pytest.mark.parametrize(
    "idle,want", [(0.0, 1), (0.4, 1), (0.6, 1), (1.6, 2), (2.0, 2), (9.0, 2)]
)
def test_the_rule_is_the_idle_cores_between_one_and_torchs_default(
    monkeypatch, idle, want
):
    monkeypatch.setattr("recbole_attn.engine.threads.TORCH_DEFAULT", 2)
    count, why = choose_threads(None, "cpu", idle=lambda: idle)
    assert count == want and "idle" in why


def test_the_key_and_the_gpu_keep_the_rule_out(monkeypatch):
    monkeypatch.setattr("recbole_attn.engine.threads.TORCH_DEFAULT", 8)

    def never():
        raise AssertionError("the idle cores are not measured")

    assert choose_threads(3, "cpu", idle=never) == (3, "threads")
    assert choose_threads(None, "cuda:0", idle=never)[0] == 8
    assert choose_threads(None, "cpu", idle=lambda: None)[0] == 8


def test_a_run_sets_its_threads_and_refuses_a_bad_count(tiny_config, tmp_path):
    before = torch.get_num_threads()
    try:
        config, *_ = build(
            "SASRecAP", "tiny", config_dict={**tiny_config, "threads": 1}
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ConfigError, match="threads"):
        build("SASRecAP", "tiny", config_dict={**tiny_config, "threads": 0})
