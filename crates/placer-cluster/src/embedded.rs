//! The embedded, in-memory cluster (to be written).
