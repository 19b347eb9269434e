"""The tags a whole-cluster run (suite/cluster.py) puts on its runs, which analysis/cluster.py reads back.

- `cluster_run`: the cluster run's id, shared by all its runs;
- `cluster_phase`: `node` (the per-node suite), `pair` (a ping-pong between two nodes), `iperf`
  (an iperf3 pair) or `hpl` (HPL across all nodes);
- `cluster_node` (phase node): the node's name; `cluster_pair` (phases pair, iperf): "a,b".
"""

TAG_RUN, TAG_PHASE, TAG_NODE, TAG_PAIR = "cluster_run", "cluster_phase", "cluster_node", "cluster_pair"
PHASES = ("node", "pair", "iperf", "hpl")
