//! The scheduler driver (to be written).
