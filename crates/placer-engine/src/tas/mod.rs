//! Hierarchical topology-aware scheduling (seed 002).
