"""Imported last by the forkserver that starts DDP's ranks, after torch: freezes what it has loaded.

Every rank is a fork of the forkserver and shares its memory until it writes to a page. Python's
garbage collector writes to every object it examines, so a rank's first full collection would copy
most of torch's pages into the rank (a hundred MB or more per rank). `gc.freeze()` moves everything
imported so far out of the collector's sight: those pages stay shared between the ranks.
"""
import gc

gc.freeze()
