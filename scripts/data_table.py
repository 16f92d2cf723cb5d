"""The one reader of the published tables in tests/data (CSV with a header row, lines starting
with '#' holding their sources and notes, blank lines ignored), for every script that reads one.

  rows(path)  the table's rows, each a dict from the header's names to the row's strings.
"""
import csv


def rows(path):
    with open(path) as fh:
        return list(csv.DictReader(line for line in fh if line.strip() and not line.startswith("#")))
