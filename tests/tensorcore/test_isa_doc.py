"""docs/isa.md carries the encoding tables of golden.tensorcore, unchanged."""

from tools import isa_doc


def test_docs_tables_match_the_encoding_tables():
    assert isa_doc.generated_part(isa_doc.DOC.read_text()) == isa_doc.tables(), \
        "docs/isa.md is stale: run python -m tools.isa_doc"
