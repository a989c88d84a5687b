"""The words: formatting (``fmt``), causes, sentences, the explanation document
(``explanation``: the contract the renderers read), the verdict and the comparison
finished for a report. Reads ``paprof.model`` and ``paprof.read``."""
