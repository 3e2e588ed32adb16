"""The counterweight study (``docs/counterweight-study.md``): the paper's claim against zero-order methods, decided
along three axes with selection charged, fair tuning, ten seeds and stratified bootstrap intervals."""
