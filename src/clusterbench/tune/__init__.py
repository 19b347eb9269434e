"""The budgeted HPL tuner (`clusterbench tune hpl`) and what the rest of clusterbench knows about tuning.

- `search`: the search itself, independent of HPL: a space of discrete dimensions, fidelity levels
  (small N prunes, large N decides), successive halving under a time budget, a prior that orders
  candidates, repeats and robust statistics for finalists. Deterministic for a seed and the values
  it is given, so replaying stored trials reproduces every decision (that is how a second call resumes).
- `space`: HPL's search space from the planner (NB, grids, layouts, BLAS variants, the algorithm
  knobs) and the user's `--space KEY=VALUES`, bounded and checked against memory before anything runs.
- `hpl`: the HPL evaluator: one trial is one stored `hpl` run (deterministic id per session,
  configuration, level and repeat), looked up in the store before it is run.
- `rates`: the measured inputs of the HPL performance model (bench/hpl/model.py) read from the store.
- `known`: the best HPL configuration known for a system, from tuning sessions or stored runs.
"""
