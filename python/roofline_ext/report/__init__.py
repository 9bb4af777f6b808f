"""Reporting: the one-line description, tables, JSON/CSV writers, charts and the progress bar.
Formats results; decides nothing.
"""
