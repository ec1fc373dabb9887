"""The console's queue shows an array element's value (e.g. the bond length), not only [i]."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq
from tests.web.conftest import Web


def test_expanded_array_rows_show_each_value(vq: Vq, web: Web, tmp_path: Path) -> None:
    lengths = tmp_path / "bonds.txt"
    lengths.write_text("0.74\n0.80\n")
    payload = json.loads(
        vq.run("submit", "--json", "--array-from", str(lengths), "--", "true").stdout
    )
    html = web.http.get("/", params={"open": payload["array_group_id"]}).text
    assert '[0] <span class="array-value" title="0.74">0.74</span>' in html
    assert '[1] <span class="array-value" title="0.80">0.80</span>' in html
