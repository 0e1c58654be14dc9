//! ValidatingAdmissionPolicy objects (their API model is [`crate::model`]): their validation
//! (§7), and their compiled form, built once per object version.

pub mod compile;
pub mod compile_mutating;
pub mod namespace_object;
pub mod reads;
pub mod snapshot;
pub mod validate;
pub mod validate_mutating;

pub use compile::CompiledPolicy;
pub use snapshot::{CompileCache, Scope, Snapshot, SnapshotBuilder};
