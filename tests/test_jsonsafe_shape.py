"""The loader's faster checks answer as the slower ones they replace (issue 40): the
numbers' shape told from a file's bytes, the brackets counted in the same pass, and the
reports of a folder sorted without comparing paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paprof import jsonsafe
from paprof.read import store_files

_OLD_NUMBERS = str.maketrans("0123456789Ee-", "0000000000ee+")


def _old_finite(text: str) -> bool:
    """``jsonsafe._finite`` as it was: on the text, not its bytes."""
    if "Infinity" in text:
        return False
    shape = text.translate(_OLD_NUMBERS)
    return "e000" not in shape and "e+000" not in shape and "0" * 200 not in shape


TRICKY = [
    "", "{}", '{"a": 1e99}', '{"a": 1e100}', '{"a": 1E+100}', '{"a": 1e-100}',
    '{"a": 1E-99}', '{"a": 1e+0400}', '{"a": -1e0000}', '"e000"', '"E+999"', '"e-12"',
    "1" * 199, "1" * 200, "9" * 199 + ".5", "-" + "7" * 200, "1" * 100 + "x" + "1" * 100,
    '"Infinity"', "-Infinity", "Infinit", "infinity", '{"x": "Inf\u00e9inity"}',
    '"\u00e9e000"', '"e\u00e9000"', '"e\u0660\u0661\u0662"',  # Arabic-Indic digits: not JSON's
    '"\uff45\uff10\uff10\uff10"',  # fullwidth "e000": not ASCII
    '"\ud800e000"', '"e\udfff+000"',  # lone surrogates
    '"\U0001f600" 1e300', "e\n000", "e 000", "e--000", "e+-000", "ee000", "E0001",
    '[{"k": [1, 2, {"e": "000"}]}]', "{[{[", "\u00e9{\u00e9[",
]


@pytest.mark.parametrize("text", TRICKY)
def test_the_shape_from_bytes_answers_as_the_text_did(text):
    assert jsonsafe._finite(text) is _old_finite(text)
    finite, brackets = jsonsafe._shape(text.encode("utf-8", "surrogatepass"))
    assert finite is _old_finite(text)
    assert brackets == text.count("[") + text.count("{")


def test_parse_and_loads_agree_on_numbers_that_need_checking():
    for text in ('{"a": 1e400}', '{"a": ' + "1" * 400 + "}", '{"a": -Infinity}'):
        with pytest.raises(jsonsafe.Refused, match="'a'"):
            jsonsafe.loads(text)
        with pytest.raises(jsonsafe.Refused, match="'a'"):
            jsonsafe.parse(text.encode())
    text = '{"\u00e9": [1e99, "e000", "Infinity"], "b": ' + "[" * 30 + "]" * 30 + "}"
    assert jsonsafe.parse(text.encode()) == jsonsafe.loads(text)
    deep = "[" * 40 + '{"a": ' * 30 + "1" + "}" * 30 + "]" * 40  # 70 levels, of both kinds
    with pytest.raises(jsonsafe.Refused, match="nested deeper than 64"):
        jsonsafe.parse(deep.encode())
    shallow = '["' + "[{" * 100 + '"]'  # 200 brackets, all in a string: one level
    assert jsonsafe.parse(shallow.encode()) == ["[{" * 100]


def test_a_folders_files_come_in_the_order_paths_sort(tmp_path):
    names = ["a/b.x", "a-c/x.x", "a.b/y.x", "a/b-c.x", "A/z.x", "a b/q.x", "\u00e9/x.x",
             "a/a/a.x", "ab.x", "a0/x.x", "a/.x", "a-/b.x", "a/-.x"]
    for name in names:
        path = tmp_path / "store" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    for root in (tmp_path / "store", str(tmp_path / "store") + os.sep):
        found = store_files.files(root, ".x")
        assert found == sorted(map(Path, found)) and len(found) == len(names)
        assert all(type(p) is type(tmp_path) for p in found)


def test_a_file_is_read_whole_without_a_file_object(tmp_path):
    for size in (0, 1, 4096, 65536, 300_001):
        path = tmp_path / f"f{size}"
        data = os.urandom(size)
        path.write_bytes(data)
        assert store_files.read(path) == data
        fd = os.open(path, os.O_RDONLY)
        try:
            os.read(fd, 3)
            with open(path, "ab") as grow:  # written to after its size was known
                grow.write(b"more")
            assert store_files.read_all(fd) == data[3:] + b"more"
        finally:
            os.close(fd)
    assert store_files.read(tmp_path / "absent") is None
