"""What the lineage page (``lakeflow harvest --format html``) shows, read from the page itself."""

from __future__ import annotations

import json
import re


def page_nodes(html: str) -> dict[str, dict[str, list[str]]]:
    """The lineage page's dataset details (its embedded ``lineage-data``): name → section → items (the
    sections that list items; a table's, such as the schema's, has rows instead)."""
    data = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', html, re.DOTALL)
    assert data is not None
    details = json.loads(data.group(1))["nodes"].values()
    return {d["name"]: {s["title"]: s["items"] for s in d["sections"] if "items" in s} for d in details
            if d["kind"].startswith("Dataset")}
