//! placer-sim
