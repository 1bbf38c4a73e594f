"""Pure analysis on top of the measured counters: breakdowns of acceptance (per step, by segment,
along the output, by context length), repetition of outputs, speedup under load, gate power and
compare marks. No I/O, no printing, no clock: the results layer renders what these return.
Every definition is stated in the module that computes it; the base metrics are harness/metrics.py.
"""
