"""What a grader reads: CSV, JSON, HTML and notebook exports, the record table, the step-sweep
SVG, and the submissions (notebooks and ledgers under a folder) every export is made from.

It may import every other room; nothing in the core imports it.
"""
