"""``hta.analyzers.critical_path_analysis``: the critical path graph, its nodes, edges and
edge types, and ``restore_cpgraph`` (cclq.api.hta_critical_path, over the view
``hta_critical_path_edges``)."""

from cclq.api.hta_critical_path import CPEdge, CPEdgeType, CPGraph, CPNode, restore_cpgraph

__all__ = ["CPEdge", "CPEdgeType", "CPGraph", "CPNode", "restore_cpgraph"]
