//! The patch kinds of a mutation (in-tree `mutating/patch`).
pub mod diff;
