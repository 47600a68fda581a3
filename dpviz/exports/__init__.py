"""Files made from a trace: the tutorial's printed log and a Chrome trace for Perfetto. No torch.
(The HTML report draws every view: dpviz.figures.report.)
"""
