//! The Job controller (to be written).
