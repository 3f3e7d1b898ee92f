//! Pod-level and placement-level plugins.
