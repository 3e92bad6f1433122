"""Tests of the dataset converters (recbole_attn.data.convert; dataset_scripts/ and
``recbole-attn convert`` are their command lines).

Fixture files are written into tmp_path by the tests; the real raw files are read from
``<repo>/../shared/datasets/raw`` when present (the tests that need them skip otherwise).
"""

import gzip
import json
import os
import shlex
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from recbole_attn.data import hints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "dataset_scripts")
RAW = os.path.normpath(os.path.join(REPO, os.pardir, "shared", "datasets", "raw"))

from recbole_attn.data.convert import amazon, anime  # noqa: E402
from recbole_attn.data.convert import clean as _clean  # noqa: E402
from recbole_attn.data.convert import cli as _cli  # noqa: E402
from recbole_attn.data.convert import movielens, pairs, seqfile  # noqa: E402
from recbole_attn.data.convert import write as _write  # noqa: E402
from recbole_attn.data.convert.read import ITEM, TIME, USER  # noqa: E402
from recbole_attn.data.convert.read import ConversionError  # noqa: E402

INTER_HEADER = "user_id:token\titem_id:token\ttimestamp:float\n"
INTER_HEADER_R = "user_id:token\titem_id:token\ttimestamp:float\trating:float\n"
ITEM_HEADER = "item_id:token\tcategories:token_seq\n"


def write(path, text, encoding="utf-8"):
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding=encoding, newline="") as f:
        f.write(text)
    return path


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def raw(*parts):
    path = os.path.join(RAW, *parts)
    if not os.path.exists(path):
        pytest.skip(f"real raw file absent: {path} (../shared/datasets not available)")
    return path


def run(module, *argv):
    """Run a converter's main in-process like the command line does; return the code."""
    return _cli.run_main(module.main, [str(a) for a in argv])


def lines(*rows):
    return "".join("\t".join(map(str, row)) + "\n" for row in rows)


# ------------------------------------------------------------------------ helpers


def test_k_core_cascade_is_iterated_to_a_fixed_point():
    # item 4 has one interaction -> user 4 drops to one -> item 3 drops to one ->
    # user 3 drops to one: four passes, only users 1 and 2 remain.
    df = pd.DataFrame(
        {
            USER: ["1", "1", "2", "2", "3", "3", "4", "4"],
            ITEM: ["1", "2", "1", "2", "2", "3", "3", "4"],
            TIME: range(8),
        }
    )
    out = _clean.k_core(df, 2)
    assert out[[USER, ITEM]].values.tolist() == [
        ["1", "1"],
        ["1", "2"],
        ["2", "1"],
        ["2", "2"],
    ]
    assert out.attrs["k_core_passes"] == 4
    again = _clean.k_core(out, 2)
    assert again.attrs["k_core_passes"] == 0 and len(again) == 4
    # 0 (and 1) disable; users and items can have different thresholds
    assert len(_clean.k_core(df, 0)) == 8 and len(_clean.k_core(df, 1)) == 8
    only_items = _clean.k_core(df, 0, item_k=2)  # drop item 4 only, no cascade on users
    assert only_items[ITEM].tolist() == ["1", "2", "1", "2", "2", "3", "3"]


def test_chronological_is_stable_and_keeps_first_appearance_of_users():
    df = pd.DataFrame(
        {
            USER: ["b", "a", "b", "a", "b"],
            ITEM: ["x", "y", "z", "w", "v"],
            TIME: [5, 3, 1, 3, 5],
        }
    )
    out = _clean.chronological(df)
    assert out[[USER, ITEM]].values.tolist() == [
        ["b", "z"],
        ["b", "x"],  # tie at 5: file order x, v
        ["b", "v"],
        ["a", "y"],  # tie at 3: file order y, w
        ["a", "w"],
    ]


def test_category_tokens_have_no_whitespace():
    assert _clean.clean_token("  Slice of\tLife ") == "Slice_of_Life"
    assert _clean.clean_token("   ") is None
    assert _clean.clean_tokens(["Face", "Skin Care", "Face", "", "Skin  Care"]) == [
        "Face",
        "Skin_Care",
    ]


def test_write_atomic_failure_leaves_existing_files_untouched(tmp_path):
    a, b = str(tmp_path / "a.txt"), str(tmp_path / "b.txt")
    write(a, "old a\n")

    def boom(f):
        f.write("half written")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        _write.write_atomic({a: "new a\n", b: boom}, overwrite=True)
    assert read(a) == "old a\n"
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # no b, no temporary file
    with pytest.raises(ConversionError, match="--overwrite"):
        _write.write_atomic({a: "new a\n", b: "b\n"})
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
    _write.write_atomic({a: "new a\n", b: "b\n"}, overwrite=True)
    assert read(a) == "new a\n" and read(b) == "b\n"
    # the files get the usual permissions, not mkstemp's private 0600
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(b).st_mode & 0o777 == 0o666 & ~umask


# ---------------------------------------------------------------- sequence files

SEQS = "1 10 11 12\n2 10 11 12 10\n3 12 11 10\n4 10 13\n"
# brand-like ids: 100 and 101 (only ever first); 1 is first for item 13 but also later.
ATTRS = {"10": [100, 1, 2], "11": [101, 1, 3], "12": [100], "13": [1, 4]}
SEQ_INTER = INTER_HEADER + lines(
    (1, 10, 1),
    (1, 11, 2),
    (1, 12, 3),
    (2, 10, 1),
    (2, 11, 2),
    (2, 12, 3),
    (3, 12, 1),
    (3, 11, 2),
    (3, 10, 3),
)


def seq_fixture(tmp_path):
    seqs = write(tmp_path / "raw" / "S.txt", SEQS)
    attrs = write(tmp_path / "raw" / "S_item2attributes.json", json.dumps(ATTRS))
    return seqs, attrs


def test_seqfile_exact_output_dedup_kcore_and_categories(tmp_path, capsys):
    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"
    code = run(
        seqfile, "--sequences", seqs, "--attributes", attrs, "--name", "S",
        "--output_dir", out, "--k_core", 2,
    )  # fmt: skip
    assert code == 0
    # user 2's repeated 10 is dropped; item 13 (one interaction) then user 4 go by k-core
    assert read(out / "S" / "S.inter") == SEQ_INTER
    # item 12 has only a brand-like attribute -> no categories -> not in the .item file
    assert read(out / "S" / "S.item") == ITEM_HEADER + lines((10, "1 2"), (11, "1 3"))
    stdout = capsys.readouterr().out
    assert "users: 3  items: 3  interactions: 9  categories: 3 " in stdout
    assert "(2 items have categories)" in stdout and "density: 100.0000%" in stdout
    conf = yaml.safe_load(read(out / "S" / "S.yaml"))
    assert conf["load_col"] == {
        "inter": ["user_id", "item_id", "timestamp"],
        "item": ["item_id", "categories"],
    }
    assert conf["category_field"] == "categories"
    assert conf["filter_inter_by_user_or_item"] is False  # keep uncategorized items
    assert (conf["USER_ID_FIELD"], conf["ITEM_ID_FIELD"], conf["TIME_FIELD"]) == (
        "user_id",
        "item_id",
        "timestamp",
    )


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("all", ITEM_HEADER + lines((10, "100 1 2"), (11, "101 1 3"), (12, "100"))),
        (
            "brand_split",
            "item_id:token\tcategories:token_seq\tbrand:token\n"
            + lines((10, "1 2", 100), (11, "1 3", 101)),
        ),
    ],
)
def test_seqfile_attribute_modes(tmp_path, mode, expected):
    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"
    argv = ["--sequences", seqs, "--attributes", attrs, "--name", "S"]
    argv += ["--output_dir", out, "--k_core", 2, "--attributes_mode", mode]
    assert run(seqfile, *argv) == 0
    assert read(out / "S" / "S.item") == expected
    assert seqfile.brand_like_ids(ATTRS) == {100, 101}


def test_seqfile_keep_duplicates_and_no_kcore(tmp_path):
    seqs, _ = seq_fixture(tmp_path)
    out = tmp_path / "out"
    argv = ["--sequences", seqs, "--name", "S", "--output_dir", out, "--k_core", 0]
    assert run(seqfile, *argv, "--keep_duplicates") == 0
    inter = read(out / "S" / "S.inter")
    assert inter.endswith(lines((2, 12, 3), (2, 10, 4), (3, 12, 1), (3, 11, 2),
                                (3, 10, 3), (4, 10, 1), (4, 13, 2)))  # fmt: skip
    assert not os.path.exists(out / "S" / "S.item")  # no attributes -> no .item
    conf = yaml.safe_load(read(out / "S" / "S.yaml"))
    assert conf["load_col"] == {"inter": ["user_id", "item_id", "timestamp"]}
    assert conf["category_field"] is None


def test_seqfile_malformed_line_names_file_and_line(tmp_path, capsys):
    bad = write(tmp_path / "bad.txt", "1 10 11\n2\n3 10 x\n1 11 12\n5 10 11\n")
    out = tmp_path / "out"
    argv = ["--sequences", bad, "--name", "B", "--output_dir", out, "--k_core", 0]
    assert run(seqfile, *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{bad}, line 2:" in err
    assert "--skip_bad_lines" in err and "Traceback" not in err
    assert not os.path.exists(out)  # nothing written, not even the folder
    assert run(seqfile, *argv, "--skip_bad_lines") == 0
    # line 2: no item; line 3: not an integer; line 4: user 1 again
    assert "skipped 3 malformed line(s)" in capsys.readouterr().out
    assert read(out / "B" / "B.inter") == INTER_HEADER + lines(
        (1, 10, 1), (1, 11, 2), (5, 10, 1), (5, 11, 2)
    )


def test_pairs_positions_are_timestamps_and_the_file_is_kept_as_it_is(tmp_path, capsys):
    """SASRec's 'user item' lines: a line's position among its user's lines is its
    timestamp (a user's lines need not be contiguous); no k-core by default, so users
    and items with fewer than 5 interactions stay (the file is already filtered)."""
    path = write(tmp_path / "Video.txt", "1 10\n2 11\n1 12\n2 10\n1 11\n3 12\n")
    out = tmp_path / "out"
    assert run(pairs, "--interactions", path, "--name", "G", "--output_dir", out) == 0
    assert read(out / "G" / "G.inter") == INTER_HEADER + lines(
        (1, 10, 1), (1, 12, 2), (1, 11, 3), (2, 11, 1), (2, 10, 2), (3, 12, 1)
    )
    assert not os.path.exists(out / "G" / "G.item")
    assert (
        "users: 3  items: 3  interactions: 6  categories: 0 " in capsys.readouterr().out
    )
    conf = yaml.safe_load(read(out / "G" / "G.yaml"))
    assert conf == yaml.safe_load(read(os.path.join(REPO, "properties", "dataset", "Games.yaml")))  # fmt: skip
    # --k_core 2 drops user 3 (one line), then nothing else
    argv = ["--interactions", path, "--name", "G2", "--output_dir", out, "--k_core", 2]
    assert run(pairs, *argv) == 0
    assert "3\t12" not in read(out / "G2" / "G2.inter")


def test_pairs_malformed_line_names_file_and_line(tmp_path, capsys):
    path = write(tmp_path / "bad.txt", "1 10\n1 10 11\n2 x\n2 11\n")
    out = tmp_path / "out"
    argv = ["--interactions", path, "--name", "B", "--output_dir", out]
    assert run(pairs, *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{path}, line 2: expected 'user item'" in err
    assert "Traceback" not in err and not os.path.exists(out)
    assert run(pairs, *argv, "--skip_bad_lines") == 0
    assert "skipped 2 malformed line(s)" in capsys.readouterr().out
    assert read(out / "B" / "B.inter") == INTER_HEADER + lines((1, 10, 1), (2, 11, 1))


def test_undecodable_or_truncated_input_is_a_clean_error(tmp_path):
    latin = str(tmp_path / "latin.txt")
    with open(latin, "wb") as f:
        f.write(b"1 10 11\n2 10 \xe9\n")
    with pytest.raises(ConversionError, match=r"latin\.txt, line 2: not valid utf-8"):
        seqfile.parse_seqfile(latin)
    truncated = str(tmp_path / "reviews_X_5.json.gz")
    with open(truncated, "wb") as f:
        f.write(gzip.compress(b'{"reviewerID": "U1", "asin": "A1"}\n' * 50)[:40])
    with pytest.raises(ConversionError, match="cannot read"):
        amazon.parse_amazon_reviews(truncated)


def _damaged_gz(path, text):
    """A .gz file of ``text`` whose compressed data is damaged in the middle (its header
    and length intact): gzip raises zlib.error, which is no OSError."""
    data = bytearray(gzip.compress(text.encode()))
    for position in range(200, 260):
        data[position] ^= 0x55
    with open(path, "wb") as f:
        f.write(bytes(data))
    return str(path)


def test_damaged_compressed_input_is_a_clean_error(tmp_path, capsys):
    """A .gz file damaged inside (not truncated): zlib.error escaped every converter as
    a traceback (issue 53)."""
    review = (
        '{"reviewerID": "U%d", "asin": "A%d", "overall": 4.0, "unixReviewTime": %d}\n'
    )
    reviews = "".join(review % (i % 50, i % 37, 1000 + i) for i in range(20000))
    damaged = _damaged_gz(tmp_path / "reviews_X_5.json.gz", reviews)
    with pytest.raises(ConversionError, match="cannot read after line .*decompress"):
        amazon.parse_amazon_reviews(damaged)
    code = run(amazon, "--reviews", damaged, "--name", "X", "--output_dir", tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    attributes = json.dumps({str(i): [i % 7] for i in range(1, 20000)})
    damaged = _damaged_gz(tmp_path / "X_item2attributes.json.gz", attributes)
    with pytest.raises(ConversionError, match="cannot read"):
        seqfile.parse_item2attributes(damaged)
    genres = "anime_id,name,genre\n" + "".join(
        f'{i},name {i},"Action, Drama"\n' for i in range(1, 20000)
    )
    damaged = _damaged_gz(tmp_path / "anime.csv.gz", genres)
    with pytest.raises(ConversionError, match="cannot read"):
        anime.parse_anime_genres(damaged)


def test_existing_dataset_needs_overwrite(tmp_path, capsys):
    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"
    base = ["--sequences", seqs, "--name", "S", "--output_dir", out, "--k_core", 2]
    assert run(seqfile, *base, "--attributes", attrs) == 0
    before = {f: read(out / "S" / f) for f in os.listdir(out / "S")}
    assert sorted(before) == ["S.inter", "S.item", "S.yaml"]
    capsys.readouterr()
    assert run(seqfile, *base, "--k_core", 0) == 2
    err = capsys.readouterr().err
    assert "would replace" in err and "--overwrite" in err
    assert {f: read(out / "S" / f) for f in os.listdir(out / "S")} == before
    # --overwrite replaces it; the now-stale .item file (no attributes) is removed
    assert run(seqfile, *base, "--k_core", 0, "--overwrite") == 0
    assert sorted(os.listdir(out / "S")) == ["S.inter", "S.yaml"]
    assert read(out / "S" / "S.inter").count("\n") == 1 + 11


@pytest.mark.slow
def test_command_line_errors_exit_2_without_traceback(tmp_path):
    script = os.path.join(SCRIPTS, "seqfile.py")
    argv = [sys.executable, script, "--sequences", str(tmp_path / "missing.txt")]
    argv += ["--name", "M", "--output_dir", str(tmp_path / "out")]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: input file not found: ")
    assert "Traceback" not in proc.stderr
    seqs, _ = seq_fixture(tmp_path)
    argv[3] = seqs
    proc = subprocess.run(argv + ["--k_core", "2"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "users: 3  items: 3  interactions: 9" in proc.stdout
    assert read(tmp_path / "out" / "M" / "M.inter") == SEQ_INTER
    assert read(tmp_path / "out" / "M" / "M.yaml").startswith(
        "# Written by: python dataset_scripts/seqfile.py --sequences "
    )


# ------------------------------------------------------------------------- Amazon

REVIEWS_2014 = [
    {"reviewerID": "U1", "asin": "A1", "overall": 5.0, "unixReviewTime": 300},
    {"reviewerID": "U1", "asin": "A2", "overall": 3.0, "unixReviewTime": 100},
    {"reviewerID": "U2", "asin": "A1", "overall": 4.0, "unixReviewTime": 200},
    {"reviewerID": "U1", "asin": "A3", "overall": 1.0, "unixReviewTime": 100},
    {"reviewerID": "U2", "asin": "A2", "overall": 2.0, "unixReviewTime": 50},
    {"reviewerID": "U2", "asin": "A1", "overall": 4.0, "unixReviewTime": 400},
]
# 2014 metadata: python literals (single quotes), category paths with the root first
META_2014 = """\
{'asin': 'A1', 'title': "Kid's soap", 'brand': 'Acme Co', 'categories': [['Beauty', \
'Skin Care', 'Face'], ['Beauty', 'Bath & Body']]}
{'asin': 'A2', 'categories': [['Beauty']]}
{'asin': 'A3', 'brand': '', 'categories': [['Beauty', 'Makeup', 'Face']], 'price': 3.5}
{'asin': 'ZZ', 'categories': [['Beauty', 'Other']]}
"""
AMAZON_INTER = INTER_HEADER_R + lines(
    ("U1", "A2", 100, 3),  # tie at 100 keeps the file order A2, A3
    ("U1", "A3", 100, 1),
    ("U1", "A1", 300, 5),
    ("U2", "A2", 50, 2),
    ("U2", "A1", 200, 4),  # the repeated review of A1 at 400 is dropped
)


def test_amazon_2014_reviews_and_literal_meta_with_brand(tmp_path):
    reviews = write(
        tmp_path / "reviews_Beauty_5.json.gz",
        "".join(json.dumps(r) + "\n" for r in REVIEWS_2014),
    )
    meta = write(tmp_path / "meta_Beauty.json.gz", META_2014)
    out = tmp_path / "out"
    argv = ["--reviews", reviews, "--meta", meta, "--brand", "--name", "Am"]
    assert run(amazon, *argv, "--output_dir", out, "--k_core", 0) == 0
    assert read(out / "Am" / "Am.inter") == AMAZON_INTER
    # root dropped, whitespace -> _, A2 (root only) left out, brand as its own field
    assert read(out / "Am" / "Am.item") == (
        "item_id:token\tcategories:token_seq\tbrand:token\n"
        "A1\tSkin_Care Face Bath_&_Body\tAcme_Co\n"
        "A3\tMakeup Face\t\n"
    )
    conf = yaml.safe_load(read(out / "Am" / "Am.yaml"))
    assert conf["load_col"]["inter"] == ["user_id", "item_id", "timestamp"]


def test_amazon_brand_without_meta_is_a_clean_error(tmp_path, capsys):
    reviews = write(
        tmp_path / "reviews.json",
        "".join(json.dumps(r) + "\n" for r in REVIEWS_2014),
    )
    out = tmp_path / "out"
    argv = ["--reviews", reviews, "--brand", "--name", "Am", "--output_dir", out]
    assert run(amazon, *argv) == 2
    assert "--brand needs --meta" in capsys.readouterr().err
    assert not out.exists()  # nothing written
    # the option error comes before the check for an existing dataset
    write(out / "Am" / "Am.inter", "mine\n")
    assert run(amazon, *argv) == 2
    assert "--brand needs --meta" in capsys.readouterr().err
    assert read(out / "Am" / "Am.inter") == "mine\n"


def test_amazon_min_rating_implicit_and_k_core(tmp_path):
    reviews = write(
        tmp_path / "reviews_Beauty_5.json",
        "".join(json.dumps(r) + "\n" for r in REVIEWS_2014),
    )
    out = tmp_path / "out"
    argv = ["--reviews", reviews, "--name", "Am", "--output_dir", out]
    assert run(amazon, *argv, "--k_core", 0, "--min_rating", 3, "--implicit") == 0
    assert read(out / "Am" / "Am.inter") == INTER_HEADER + lines(
        ("U1", "A2", 100), ("U1", "A1", 300), ("U2", "A1", 200)
    )
    assert run(amazon, *argv, "--k_core", 2, "--overwrite") == 0  # A3 has one user
    assert read(out / "Am" / "Am.inter") == INTER_HEADER_R + lines(
        ("U1", "A2", 100, 3), ("U1", "A1", 300, 5), ("U2", "A2", 50, 2),
        ("U2", "A1", 200, 4),
    )  # fmt: skip


def test_amazon_2018_json_meta_and_malformed_lines(tmp_path, capsys):
    reviews = [
        '{"overall": 5.0, "verified": true, "reviewerID": "U1", "asin": "B1", '
        '"style": {"Color:": " Red"}, "unixReviewTime": 10}',
        '{"overall": 4.0, "verified": false, "reviewerID": "U1", "asin": "B2", '
        '"unixReviewTime": 20}',
        '{"overall": 4.0, "reviewerID": "U2", "asin": ',  # truncated
        '{"overall": 1.0, "reviewerID": "U2", "asin": "B1", "unixReviewTime": 5}',
        '{"overall": 1.0, "reviewerID": "U2", "unixReviewTime": 5}',  # no asin
    ]
    path = write(tmp_path / "Office_Products_5.json", "\n".join(reviews) + "\n")
    meta = write(
        tmp_path / "meta_Office_Products.json",
        json.dumps({"asin": "B1", "brand": "Pens Inc",
                    "category": ["Office Products", "Writing", "Pens"]}) + "\n"
        + "__import__('os').system('touch PWNED')\n"
        + json.dumps({"asin": "B2", "category": []}) + "\n",
    )  # fmt: skip
    out = tmp_path / "out"
    argv = ["--reviews", path, "--meta", meta, "--name", "O", "--output_dir", out]
    argv += ["--k_core", 0]
    assert run(amazon, *argv) == 2
    assert f"{path}, line 3:" in capsys.readouterr().err
    assert run(amazon, *argv, "--skip-bad-lines") == 0
    # reviews lines 3 and 5, meta line 2 (parsed as a literal, never evaluated)
    assert "skipped 3 malformed line(s)" in capsys.readouterr().out
    assert not os.path.exists(tmp_path / "PWNED")
    assert read(out / "O" / "O.inter") == INTER_HEADER_R + lines(
        ("U1", "B1", 10, 5), ("U1", "B2", 20, 4), ("U2", "B1", 5, 1)
    )
    assert read(out / "O" / "O.item") == ITEM_HEADER + "B1\tWriting Pens\n"


def test_amazon_ratings_csv_2014_and_2018_column_orders(tmp_path):
    rows = [("U1", "A1", "5.0", "300"), ("U1", "A2", "3.0", "100"), ("U2", "A1", "4.0", "200")]  # fmt: skip
    csv14 = write(
        tmp_path / "ratings_Beauty.csv", "".join(",".join(r) + "\n" for r in rows)
    )
    csv18 = write(
        tmp_path / "Beauty.csv",
        "".join(",".join((i, u, r, t)) + "\n" for u, i, r, t in rows),
    )  # fmt: skip
    expected = INTER_HEADER_R + lines(
        ("U1", "A2", 100, 3), ("U1", "A1", 300, 5), ("U2", "A1", 200, 4)
    )
    for path, name in ((csv14, "c14"), (csv18, "c18")):
        argv = ["--reviews", path, "--name", name, "--output_dir", tmp_path / "out"]
        assert run(amazon, *argv, "--k_core", 0) == 0
        assert read(tmp_path / "out" / name / f"{name}.inter") == expected


# ---------------------------------------------------------------- MovieLens, Anime


def test_movielens_ratings_and_latin1_genres(tmp_path):
    ratings = write(
        tmp_path / "ratings.dat",
        "1::20::5::978300760\n1::10::3::978300700\n2::10::4::978300000\n"
        "2::30::1::978300001\n",
    )
    movies = write(
        tmp_path / "movies.dat",
        "10::Café au lait (1993)::Comedy|Children's\n"
        "20::Blade Runner (1982)::Film-Noir|Sci-Fi\n"
        "30::Nothing (2015)::(no genres listed)\n",
        encoding="latin-1",
    )
    out = tmp_path / "out"
    argv = ["--ratings", ratings, "--movies", movies, "--name", "ml"]
    assert run(movielens, *argv, "--output_dir", out, "--k_core", 0) == 0
    assert read(out / "ml" / "ml.inter") == INTER_HEADER_R + lines(
        (1, 10, 978300700, 3), (1, 20, 978300760, 5),
        (2, 10, 978300000, 4), (2, 30, 978300001, 1),
    )  # fmt: skip
    assert read(out / "ml" / "ml.item") == ITEM_HEADER + lines(
        (10, "Comedy Children's"), (20, "Film-Noir Sci-Fi")
    )
    bad = write(tmp_path / "bad.dat", "1::10::5::1\n1::10::5\n")
    with pytest.raises(ConversionError, match=r"bad\.dat, line 2: expected"):
        movielens.parse_movielens_ratings(bad)


def test_anime_file_order_timestamps_unrated_and_genres(tmp_path):
    ratings = write(
        tmp_path / "rating.csv",
        "user_id,anime_id,rating\n1,20,-1\n1,10,8\n2,10,-1\n1,20,9\n2,30,7\n",
    )
    animes = write(
        tmp_path / "anime.csv",
        "anime_id,name,genre,type,episodes,rating,members\n"
        '10,"Hello, ""World""","Comedy, Slice of Life",TV,12,8.1,100\n'
        "20,Solo,Action,Movie,1,7.0,50\n"
        "30,No genre,,OVA,1,6.0,5\n",
    )
    out = tmp_path / "out"
    argv = ["--ratings", ratings, "--anime", animes, "--name", "an"]
    argv += ["--output_dir", out, "--k_core", 0]
    assert run(anime, *argv) == 0
    # timestamps are the data-row numbers; the repeated (1, 20) keeps row 1 (-1 kept)
    assert read(out / "an" / "an.inter") == INTER_HEADER_R + lines(
        (1, 20, 1, -1), (1, 10, 2, 8), (2, 10, 3, -1), (2, 30, 5, 7)
    )
    assert read(out / "an" / "an.item") == ITEM_HEADER + lines(
        (10, "Comedy Slice_of_Life"), (20, "Action")
    )
    assert run(anime, *argv, "--min_rating", 1, "--overwrite") == 0
    assert read(out / "an" / "an.inter") == INTER_HEADER_R + lines(
        (1, 10, 2, 8), (1, 20, 4, 9), (2, 30, 5, 7)
    )


# ---------------------------------------------------------------- RecBole loading


def test_converted_dataset_loads_in_recbole_and_splits_leave_one_out(
    tmp_path, monkeypatch
):
    # RecBole's Config and dataset with the fixes RecBole 1.2.1 needs on numpy 2 and
    # pandas 3 (recbole_attn.host.compat); on numpy 1 / pandas 2 they are RecBole's own
    from recbole_attn.data.preparation import data_preparation
    from recbole_attn.engine.config import AttnConfig as Config
    from recbole_attn.engine.quick_start import create_dataset

    monkeypatch.chdir(tmp_path)  # RecBole writes log/ into the working directory
    # 6 users x 5 items; item 7 has only a brand-like attribute -> uncategorized
    seqs = "".join(
        f"{u} " + " ".join(str(1 + (u + j) % 7) for j in range(5)) + "\n"
        for u in range(1, 7)
    )
    attrs = {str(i): [50 + i % 2, i % 3 + 1, 9] for i in range(1, 7)}
    attrs["7"] = [50]
    write(tmp_path / "Fx.txt", seqs)
    write(tmp_path / "Fx_attrs.json", json.dumps(attrs))
    argv = ["--sequences", "Fx.txt", "--attributes", "Fx_attrs.json", "--name", "Fx"]
    argv += ["--output_dir", "data", "--attributes_mode", "brand_split", "--k_core", 0]
    assert run(seqfile, *argv) == 0
    assert "\n7\t" not in read(tmp_path / "data" / "Fx" / "Fx.item")
    config = Config(
        model="SASRec",
        dataset="Fx",
        config_file_list=[str(tmp_path / "data" / "Fx" / "Fx.yaml")],
        config_dict={
            "data_path": str(tmp_path / "data"),
            "load_col": {
                "inter": ["user_id", "item_id", "timestamp"],
                "item": ["item_id", "categories", "brand"],
            },
            "eval_args": {
                "split": {"LS": "valid_and_test"},
                "order": "TO",
                "mode": "full",
            },
            "train_neg_sample_args": None,
            "loss_type": "CE",
            "training_mode": "last_position",
            "topk": [5],  # 7 items: full ranking returns at most 7
            "valid_metric": "NDCG@5",
            "state": "ERROR",
            "show_progress": False,
        },
    )
    dataset = create_dataset(config)
    assert dataset.user_num == 7 and dataset.item_num == 8  # + [PAD]
    assert dataset.inter_num == 30
    item7 = dataset.token2id("item_id", "7")
    cats = dataset.item_feat["categories"]
    assert cats[item7].sum().item() == 0  # all padding = uncategorized
    assert int((cats[dataset.token2id("item_id", "1")] > 0).sum()) == 2
    # item 7 is absent from the .item file: its brand is padding too
    assert dataset.item_feat["brand"][item7].item() == 0
    assert dataset.item_feat["brand"][dataset.token2id("item_id", "1")].item() != 0
    train, valid, test = data_preparation(config, dataset)
    # leave-one-out: the last item of each user is its test target
    test_feat = test._dataset.inter_feat
    valid_feat = valid._dataset.inter_feat
    assert len(test_feat) == len(valid_feat) == 6
    for k in range(6):
        user = dataset.id2token("user_id", test_feat["user_id"][k].item())
        u = int(user)
        expected = [str(1 + (u + j) % 7) for j in range(5)]
        assert (
            dataset.id2token("item_id", test_feat["item_id"][k].item()) == expected[4]
        )
        history = test_feat["item_id_list"][k][: test_feat["item_length"][k]]
        assert dataset.id2token("item_id", history.numpy()).tolist() == expected[:4]
    # the uncategorized item is a ranking target like any other
    targets = dataset.id2token("item_id", test_feat["item_id"].numpy()).tolist()
    assert "7" in targets


# ------------------------------------------------------------------------ real data


def test_real_office_is_a_5_core_fixed_point():
    path = raw("office", "Office_Products.txt")
    df = seqfile.parse_seqfile(path)
    assert (df[USER].nunique(), df[ITEM].nunique(), len(df)) == (4905, 2420, 53258)
    core = _clean.k_core(_clean.drop_duplicates(_clean.chronological(df)), 5)
    assert core.attrs["k_core_passes"] == 0 and len(core) == 53258
    assert (df.groupby(USER)[TIME].max() == df.groupby(USER).size()).all()


def test_real_games_is_rksas_games(tmp_path):
    """The SASRec authors' Video.txt converts to RKSA's Games (Table 1: 31,013 users,
    23,715 items, 287,107 interactions), each user's items in the file's order."""
    path = raw("games", "Video.txt")
    out = tmp_path / "out"
    assert (
        run(pairs, "--interactions", path, "--name", "Games", "--output_dir", out) == 0
    )
    inter = pd.read_csv(out / "Games" / "Games.inter", sep="\t", dtype=str)
    assert inter.shape[0] == 287107
    assert inter.iloc[:, 0].nunique() == 31013 and inter.iloc[:, 1].nunique() == 23715
    with open(path) as f:
        first = [line.split()[1] for line in f if line.split()[0] == "3"]
    user3 = inter[inter.iloc[:, 0] == "3"].sort_values(inter.columns[2], key=lambda c: c.astype(float))  # fmt: skip
    assert user3.iloc[:, 1].tolist() == first


def test_real_beauty_conversion_every_item_has_categories(tmp_path):
    seqs = raw("beauty", "Beauty.txt")
    attrs = raw("beauty", "Beauty_item2attributes.json")
    out = tmp_path / "out"
    argv = ["--sequences", seqs, "--attributes", attrs, "--name", "Beauty"]
    assert run(seqfile, *argv, "--output_dir", out) == 0
    inter = pd.read_csv(out / "Beauty" / "Beauty.inter", sep="\t", dtype=str)
    assert inter.shape[0] == 198502
    assert inter.iloc[:, 0].nunique() == 22363 and inter.iloc[:, 1].nunique() == 12101
    item = pd.read_csv(out / "Beauty" / "Beauty.item", sep="\t", dtype=str)
    assert len(item) == 12101 and item.iloc[:, 1].str.len().min() > 0
    cats = {t for cell in item.iloc[:, 1] for t in cell.split(" ")}
    assert len(cats) == 202  # 637 attributes - 435 brand-like ids (SOURCES.md §2)
    conf = yaml.safe_load(read(out / "Beauty" / "Beauty.yaml"))
    checked_in = yaml.safe_load(read(os.path.join(REPO, "properties", "dataset", "Beauty.yaml")))  # fmt: skip
    assert conf == checked_in


def test_real_movielens_1m_genres():
    genres = movielens.parse_movielens_movies(raw("ml-1m", "movies.dat"))
    assert len(genres) == 3883
    names = sorted({g for gs in genres.values() for g in gs})
    assert names == sorted(
        "Action Adventure Animation Children's Comedy Crime Documentary Drama Fantasy "
        "Film-Noir Horror Musical Mystery Romance Sci-Fi Thriller War Western".split()
    )
    assert genres["1"] == ["Animation", "Children's", "Comedy"]


def test_real_anime_genres():
    genres = anime.parse_anime_genres(raw("anime", "anime.csv"))
    assert len(genres) == 12232
    names = {g for gs in genres.values() for g in gs}
    assert len(names) == 43
    assert "Slice_of_Life" in names and not any(" " in n for n in names)
    assert genres["32281"] == ["Drama", "Romance", "School", "Supernatural"]


def test_real_ml100k_genre_field_matches_the_plugin_convention():
    item = pd.read_csv(raw("ml-100k", "ml-100k.item"), sep="\t", dtype=str)
    assert "class:token_seq" in item.columns
    assert item["class:token_seq"].notna().all()  # no empty token_seq cell
    assert len({g for cell in item["class:token_seq"] for g in cell.split(" ")}) == 19


# ------------------------------------------------------- checked-in yamls and hints

CHECKED_IN = {
    "Office": False,
    "Games": False,
    "Tools": False,
    "Beauty": True,
    "Sports": True,
    "Toys": True,
    "ml-1m": True,
    "anime": True,
}


@pytest.mark.parametrize("name, has_categories", sorted(CHECKED_IN.items()))
def test_checked_in_dataset_yaml_matches_what_the_converter_writes(
    name, has_categories
):
    path = os.path.join(REPO, "properties", "dataset", f"{name}.yaml")
    checked_in = yaml.safe_load(read(path))
    has_rating = name in ("ml-1m", "anime")
    assert checked_in == yaml.safe_load(
        _write.dataset_yaml(has_categories, has_rating=has_rating)
    )


def test_converter_hint_commands():
    assert hints.converter_hint("beauty", "data dir") == (
        "recbole-attn convert seqfile --sequences <path/to/Beauty.txt> "
        "--attributes <path/to/Beauty_item2attributes.json> --name beauty "
        "--output_dir 'data dir' (the raw files: aHuiWang/CIKM2020-S3Rec data/)"
    )
    assert hints.converter_hint("ml-1m", "dataset") == (
        "recbole-attn convert movielens --ratings <path/to/ml-1m/ratings.dat> "
        "--movies <path/to/ml-1m/movies.dat> --name ml-1m --output_dir dataset"
    )
    assert hints.converter_hint("anime", "dataset").startswith(
        "recbole-attn convert anime --ratings <path/to/rating.csv> "
        "--anime <path/to/anime.csv> "
    )
    assert hints.converter_hint("Games", "dataset") == (
        "recbole-attn convert pairs --interactions <path/to/Video.txt> --name Games "
        "--output_dir dataset (the raw file: kang205/SASRec data/)"
    )
    generic = hints.converter_hint("Yelp", "dataset")
    assert generic.startswith(
        "recbole-attn convert {amazon,seqfile,pairs,movielens,anime} <raw files> "
        "--name Yelp --output_dir dataset"
    )


def test_converter_hint_runs_with_the_raw_files(tmp_path):
    """The hint's command, placeholders replaced by the real files, converts."""
    seq, attrs = raw("toys", "Toys_and_Games.txt"), raw(
        "toys", "Toys_and_Games_item2attributes.json"
    )
    hint = hints.converter_hint("Toys", str(tmp_path / "data"))
    argv = shlex.split(hint.split(" (the raw files")[0])
    assert argv[:3] == ["recbole-attn", "convert", "seqfile"]
    argv = [{"<path/to/Toys_and_Games.txt>": seq}.get(a, a) for a in argv[3:]]
    argv = [
        {"<path/to/Toys_and_Games_item2attributes.json>": attrs}.get(a, a) for a in argv
    ]
    assert run(seqfile, *argv) == 0
    inter = pd.read_csv(tmp_path / "data" / "Toys" / "Toys.inter", sep="\t", dtype=str)
    assert len(inter) == 167597


def test_options_take_underscores_and_hyphenated_aliases(tmp_path, capsys):
    """One option style (RecBole's underscores); the hyphenated spelling is an alias."""
    seq = write(tmp_path / "s.txt", "1 10 11 12\n2 10 11 12\n")
    for style in (["--output_dir", "--k_core"], ["--output-dir", "--k-core"]):
        out = tmp_path / style[0].strip("-")
        argv = ["--sequences", seq, "--name", "S", style[0], out, style[1], 0]
        assert run(seqfile, *argv) == 0, capsys.readouterr().err
        assert os.path.isfile(out / "S" / "S.inter")
    assert "--skip_bad_lines" in seqfile.build_parser().format_help()


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_input_file_says_so(tmp_path, capsys, content):
    seq = write(tmp_path / "empty.txt", content)
    argv = ["--sequences", seq, "--name", "E", "--output_dir", tmp_path / "out"]
    assert run(seqfile, *argv) == 2
    err = capsys.readouterr().err
    assert f"{seq} is empty" in err and "Traceback" not in err


def test_header_only_input_says_no_interaction(tmp_path, capsys):
    ratings = write(tmp_path / "rating.csv", "user_id,anime_id,rating\n")
    argv = ["--ratings", ratings, "--name", "A", "--output_dir", tmp_path / "out"]
    assert run(anime, *argv) == 2
    assert "holds no interaction" in capsys.readouterr().err
