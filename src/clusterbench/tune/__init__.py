"""The budgeted tuner (`clusterbench tune hpl`) and what the rest of clusterbench knows about tuning.

The tuner knows no benchmark: it asks the benchmark's tuning declaration (its class attribute `tuning`,
a bench/declare.py `Tuning`; HPL's is bench/hpl/tuning.py) for its space, its fidelity knob and levels,
the model that predicts a trial, and the input file of the best configuration.

- `search`: the search itself: a space of discrete dimensions, fidelity levels (a small problem
  prunes, a large one decides), successive halving under a time budget, a prior that orders
  candidates, repeats and robust statistics for finalists. Deterministic for a seed and the values
  it is given, so replaying stored trials reproduces every decision (that is how a second call resumes).
- `space`: the session's space (the declaration's, with the user's `--space KEY=VALUES`, bounded and
  checked before anything runs), its fixed values and its levels.
- `trials`: the evaluator: one trial is one stored run of the benchmark (deterministic id per session,
  configuration, level and repeat), looked up in the store before it is run.
- `session`: one session from the options to the search, its refusals and its outputs.
- `rates`: the measured inputs of the declaration's model (HPL's: bench/hpl/model.py) read from the store.
- `known`: the best configuration known for a system, from tuning sessions or stored runs.
"""
