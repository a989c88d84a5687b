"""A mistyped command names the nearest ones (issue 39): one line, exit 2."""

from __future__ import annotations


def test_a_mistyped_command_suggests_the_nearest(invoke):
    result = invoke("tabel")
    assert result.exit_code == 2
    assert "No such command 'tabel'; did you mean 'table'?" in result.output


def test_a_word_near_no_command_says_only_that_it_is_unknown(invoke):
    result = invoke("xyzzy")
    assert result.exit_code == 2 and "did you mean" not in result.output
    assert "No such command 'xyzzy'" in result.output
