"""False precision through ``.item()``: a float32 tensor's value keeps its dtype after ``.item()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from _results import Fixed
from numbook.core.result import CheckResult
from numbook.core.verify import PageContext, verify_page

CHECK = textwrap.dedent("""
    import torch
    from numbook.check import value
    t = torch.tensor(1.2345678901, dtype=torch.float32)
    value("via_item", t.item())
    value("fp64_item", torch.tensor(1.2345678901, dtype=torch.float64).item())
    value("bf16_item", torch.tensor(1.2345678901, dtype=torch.bfloat16).item())
    value("derived", t.item() * 2)
""")


def test_item_of_a_low_precision_tensor_records_its_dtype(tmp_path: Path) -> None:
    (tmp_path / "c.py").write_text(CHECK, encoding="utf-8")
    out = tmp_path / "result.json"
    env = dict(os.environ, NUMBOOK_RESULT=str(out))
    subprocess.run([sys.executable, str(tmp_path / "c.py")], env=env, check=True, timeout=120)
    dtypes = json.loads(out.read_text(encoding="utf-8"))["dtypes"]
    assert dtypes == {"via_item": "float32", "bf16_item": "bfloat16"}   # fp64 carries its digits; arithmetic is new


def test_a_claim_with_more_digits_than_a_float32_item_carries_fails() -> None:
    res = CheckResult("checks/demo.py", "ok", values={"via_item": 1.2345678806304932}, dtypes={"via_item": "float32"})
    ctx, results = PageContext("docs/x.md", "demo.py"), Fixed(lambda name: res)
    assert [str(d) for d in verify_page("It is [[1.234567880630|via_item]].", ctx, results).diagnostics] == [
        "docs/x.md:1: claim 'via_item' is written with 13 significant digits, but checks/demo.py computed it in "
        "float32, which carries about 8: round it"]


def test_a_stored_value_written_exactly_is_no_false_precision() -> None:
    res = CheckResult("checks/demo.py", "ok", values={"last": 11.0859375}, dtypes={"last": "float16"})
    ctx, results = PageContext("docs/x.md", "demo.py"), Fixed(lambda name: res)
    assert [str(d) for d in verify_page("It is [[11.0859375|last]].", ctx, results).diagnostics] == []
    assert [str(d) for d in verify_page("It is [[11.08594|last]].", ctx, results).diagnostics] == [
        "docs/x.md:1: claim 'last' is written with 7 significant digits, but checks/demo.py computed it in float16, "
        "which carries about 4: round it"]
