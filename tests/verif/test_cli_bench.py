"""``tpu-rtl bench SECTION``: one entry point, options that do nothing refused before any
measurement, and tracked docs left alone unless asked."""

import pytest

from verif import cli
from verif.cli import bench


def _fails(capsys, *argv):
    assert cli.main(["bench", *argv]) == 2
    return capsys.readouterr().err.strip()


def test_every_section_is_listed_in_help(capsys):
    assert cli.main(["bench", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for section in ("blocks", "sparsecore", "system", "network", "regression", "dma", "vpu"):
        assert f"{section}:" in text


@pytest.mark.parametrize("argv, message", [
    (("dma", "--quick"), "--quick applies to bench blocks and system, not to bench dma"),
    (("system", "--twisted", "4x4x8"), "--twisted applies to bench network, not to bench system"),
    (("blocks", "--workers", "1"), "--workers applies to bench regression, not to bench blocks"),
    (("vpu", "--out", "x.md"), "bench vpu prints a table and writes no document"),
    (("system", "--out", "x.md", "--update-docs"), "give --out FILE or --update-docs, not both"),
])
def test_options_that_do_nothing_are_refused(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert message in _fails(capsys, *argv)
    assert list(tmp_path.iterdir()) == []        # refused before anything was written


def test_documents_go_under_build_unless_asked(monkeypatch, tmp_path):
    def doc(*argv):
        return bench._document(cli._parser("bench").parse_args(["bench", *argv]))
    assert str(doc()) == "build/bench/benchmarks.md"
    assert str(doc("system")) == "build/bench/system.md"
    assert str(doc("network", "--update-docs")) == "docs/network.md"
    assert str(doc("regression", "--out", str(tmp_path / "r.md"))) == str(tmp_path / "r.md")
    assert doc("dma") is None
