"""A regression verdict as JUnit XML, for CI systems that show test results.

One ``<testsuite>`` per kernel variant, one ``<testcase>`` per (shape, metric); a
regression is a ``<failure type="regression">`` whose message names variant, metric,
baseline, now and the allowance. Notes (allowed mismatches, runs without a baseline
entry) go to the suites' ``<system-out>``. Standard library only.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

from paprof import outputs
from paprof.safetext import shown

from paprof.gate import Verdict

_PROPERTIES = ("gpu", "ncu_version", "clock_control", "git_commit")
"""Provenance of the current runs shown as each suite's ``<properties>``."""


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold at all (control characters, U+FFFE, U+FFFF, lone
surrogates): a name holding one would make the file not well-formed."""


def _x(text) -> str:
    """``text`` with control and bidi characters shown escaped (``paprof.safetext``) and
    every other character XML cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", shown(text, newlines=True))


def junit_tree(verdict: Verdict) -> ET.ElementTree:
    """The ``<testsuites>`` document of ``verdict``."""
    failures = len(verdict.regressions)
    root = ET.Element(
        "testsuites",
        name="paprof check",
        tests=str(len(verdict.results)),
        failures=str(failures),
        errors="0",
    )
    suites: dict[str, ET.Element] = {}
    for result in verdict.results:
        suite = suites.get(result.name)
        if suite is None:
            suite = suites[result.name] = ET.SubElement(
                root, "testsuite", name=_x(f"paprof.check.{result.name.replace('/', '.')}")
            )
            props = ET.SubElement(suite, "properties")
            for key in _PROPERTIES:
                value = getattr(verdict.provenance, key)
                if value is not None:
                    ET.SubElement(props, "property", name=key, value=_x(value))
        case = ET.SubElement(
            suite,
            "testcase",
            classname=suite.get("name"),
            name=_x(f"{result.metric} [{result.shape}]"),
            time="0",
        )
        if result.regressed:
            failure = ET.SubElement(case, "failure", type="regression", message=_x(result.message))
            cause = verdict.cause_of(result)
            failure.text = _x(result.message + (f"\ncause: {cause.line()}" if cause else ""))
        out = ET.SubElement(case, "system-out")
        out.text = _x(f"{result.outcome}: {result.message}")
        if result.outcome.startswith("ambiguous"):  # passed, but say so where CI tools look
            ET.SubElement(case, "properties").append(
                ET.Element("property", name="verdict", value="ambiguous"))
    for suite in suites.values():
        cases = suite.findall("testcase")
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
        suite.set("errors", "0")
        suite.set("skipped", "0")
        if verdict.notes:
            ET.SubElement(suite, "system-out").text = _x("\n".join(verdict.notes))
    ET.indent(root)
    return ET.ElementTree(root)


MARK = '<testsuites name="paprof check"'
"""Near the top of every JUnit file paprof writes: such a file is replaced without --force."""


def write_junit(verdict: Verdict, path: str | os.PathLike, force: bool = False,
                inputs: Iterable = ()) -> Path:
    """Write ``verdict`` as JUnit XML to ``path`` (UTF-8, with an XML declaration),
    atomically; see ``paprof.outputs`` for what may be replaced."""
    check_target(path, force, inputs)
    return outputs.write(path, _xml(verdict), parents=True)


def _xml(verdict: Verdict) -> bytes:
    return ET.tostring(junit_tree(verdict).getroot(), encoding="utf-8", xml_declaration=True)


def junit_text(verdict: Verdict) -> str:
    """The JUnit XML of ``verdict`` as text (``--junit -``), as ``write_junit`` writes it."""
    return _xml(verdict).decode("utf-8") + "\n"


def check_target(path: str | os.PathLike, force: bool = False, inputs: Iterable = ()) -> None:
    """``UserError`` now when ``write_junit`` would refuse ``path``."""
    outputs.check_target(path, what="a paprof check JUnit file", mark=MARK, force=force,
                         inputs=inputs, parents=True)
