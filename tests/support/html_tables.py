"""Reading the HTML tables of a check the way a person reads them: by class, header and row."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    """Every table in a page as {"class", "header": [...], "rows": [[cell, ...], ...]}.

    A cell is {"text": all its text, "code": [text of each <code>], "meta": text of its
    shape/dtype/device note}, so tests read the table the way a person reads it.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self._cell, self._in = [], None, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"class": attrs.get("class", ""), "header": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = {"text": "", "code": [], "meta": "", "head": tag == "th"}
        elif self._cell is not None and tag == "code":
            self._cell["code"].append("")
        self._in.append((tag, attrs.get("class", "")))

    def handle_endtag(self, tag):
        while self._in and self._in.pop()[0] != tag:
            pass
        if tag in ("td", "th") and self._cell is not None:
            table, cell = self.tables[-1], self._cell
            if cell.pop("head") and len(table["rows"]) == 1:
                table["header"].append(cell["text"].strip())
            else:
                table["rows"][-1].append(cell)
            self._cell = None
        if tag == "tr" and self.tables and self.tables[-1]["rows"] == [[]]:
            self.tables[-1]["rows"] = []  # the header row

    def handle_data(self, data):
        if self._cell is None:
            return
        self._cell["text"] += data
        tags = [t for t, _c in self._in]
        if "code" in tags:
            self._cell["code"][-1] += data
        if any("jp-gradcheck-meta" in c for _t, c in self._in):
            self._cell["meta"] += data


def tables_in(page: str) -> dict[str, dict]:
    """The tables of an HTML page by their class."""
    parser = _Tables()
    parser.feed(page)
    return {table["class"]: table for table in parser.tables}


def column(table: dict, header: str, row: int = 0) -> dict:
    """The cell under `header` in data row `row`."""
    return table["rows"][row][table["header"].index(header)]
