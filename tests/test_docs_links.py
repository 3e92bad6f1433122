"""README.md and docs/: every relative link resolves (file, and heading where it names
one), the README stays a first page (issue 75), and the command lists of the README
and of ``--help`` name every command the CLI has."""

import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(REPO, "README.md")] + sorted(
    glob.glob(os.path.join(REPO, "docs", "*.md"))
)

#: [text](target) and ![alt](target), the target up to a space or ")"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _without_code(text):
    """The page without its fenced code blocks and inline code spans."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but ``-``/``_`` dropped,
    spaces as ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"(?ms)^```.*?^```", "", f.read())
    found, seen = set(), {}
    for line in text.splitlines():
        if match := re.match(r"#{1,6}\s+(.*)", line):
            slug = anchor(match.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def relative_links(path):
    with open(path, encoding="utf-8") as f:
        text = _without_code(f.read())
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # https:, mailto:, ...
        yield target


def test_the_anchor_of_a_heading_is_githubs():
    assert anchor("STOSA (`recbole_attn/model/stosa.py`)") == (
        "stosa-recbole_attnmodelstosapy"
    )
    assert anchor("PAtt / DPAtt") == "patt--dpatt"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(page):
        where, _, heading = target.partition("#")
        path = (
            os.path.normpath(os.path.join(os.path.dirname(page), where))
            if where
            else page
        )
        if not os.path.exists(path):
            broken.append(f"{target} (no such file)")
        elif heading and path.endswith(".md") and heading not in anchors(path):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{os.path.relpath(page, REPO)}: " + ", ".join(broken)


#: a page of ours named in code spans (`docs/tuning.md`): read as a link from the repo root
NAMED_PAGE = re.compile(r"`((?:docs|experiments)/[^`\s<>*{}]+\.md)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, REPO))
def test_every_page_named_in_code_exists(page):
    with open(page, encoding="utf-8") as f:
        named = NAMED_PAGE.findall(f.read())
    missing = [p for p in named if not os.path.exists(os.path.join(REPO, p))]
    assert not missing, f"{os.path.relpath(page, REPO)} names {missing}"


def _readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_the_readme_is_a_first_page():
    """At most 160 lines, set-up within its first 40 and the main job within its first
    60; no commit hash and no measurement date (those live in docs/)."""
    lines = _readme().splitlines()
    assert len(lines) <= 160
    numbered = {line: n for n, line in reversed(list(enumerate(lines, 1)))}
    assert numbered["## Set up"] <= 40
    assert numbered["recbole-attn --model=STOSA --dataset=ml-100k"] <= 60
    text = _readme()
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.findall(
        r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text
    )


def test_the_readme_links_every_docs_page():
    linked = {
        os.path.normpath(os.path.join(REPO, target.partition("#")[0]))
        for target in relative_links(os.path.join(REPO, "README.md"))
    }
    pages = set(glob.glob(os.path.join(REPO, "docs", "*.md")))
    assert not pages - linked, sorted(os.path.relpath(p, REPO) for p in pages - linked)


def _commands():
    """Every command word of ``recbole-attn`` but the training run itself."""
    from recbole_attn import cli

    return [
        w for w in cli.COMMANDS + tuple(cli.OWN_PARSERS) if w not in ("run", "tune")
    ]


def test_help_names_every_command(capsys):
    from recbole_attn.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    missing = [w for w in _commands() if f"recbole-attn {w} " not in text]
    assert not missing, f"--help does not name {missing}"
