"""Option values given as text (command line, scripts): ``NS.KEY=VALUE`` parameters and
stiffness values, as ``bcg grad`` and ``bcg train`` take them."""

from __future__ import annotations

import json


def parse_stiffness(s: str):
    """A stiffness as text: a number (solref time constant, s) or a name (soft, stiff, ...)."""
    try:
        return float(s)
    except ValueError:
        return s


def parse_params(pairs, capacity=None, capacity_for=("bcg", "bcg-stein")) -> dict:
    """``NS.KEY=VALUE`` strings (and a BCG ``capacity``) as ``{NS: {KEY: value}}``; values are
    JSON where they parse as JSON, else strings. ``capacity`` (an int or a fraction of the
    batch, as text) goes to every namespace in ``capacity_for``."""
    p = {name: {} for name in capacity_for}
    if capacity is not None:
        try:
            c = float(capacity)
        except ValueError:
            raise ValueError(f"--capacity must be a number, got {capacity!r}") from None
        for name in capacity_for:
            p[name]["capacity"] = int(c) if c >= 1 and c == int(c) else c
    for kv in pairs or []:
        if "=" not in kv or "." not in kv.split("=")[0]:
            raise ValueError(f"--param expects NAMESPACE.NAME=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        name, par = k.rsplit(".", 1)  # a namespace may be an import path: pkg.mod:factory
        try:
            val = json.loads(v)
        except json.JSONDecodeError:
            val = v
        p.setdefault(name, {})[par] = val
    return p
