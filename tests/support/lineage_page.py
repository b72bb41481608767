"""What the lineage page (``lakeflow harvest --format html``) shows, read from the page itself."""

from __future__ import annotations

import json
import re


def page_nodes(html: str) -> dict[str, dict[str, list[str]]]:
    """The lineage page's dataset details (its embedded ``lineage-data``): name → section → items."""
    data = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', html, re.DOTALL)
    assert data is not None
    details = json.loads(data.group(1))["nodes"].values()
    return {d["name"]: {s["title"]: s["items"] for s in d["sections"]} for d in details
            if d["kind"].startswith("Dataset")}
