"""Estimates: what a job would take, cost and wait before it is submitted (``forecast``), and
how far such estimates landed from the runs (``accuracy``)."""
