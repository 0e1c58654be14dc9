//! The compile environment: the Kubernetes version whose libraries are available and the
//! declared variables. [`Env::compile`] (in [`super::program`]) compiles against it.

use super::types::Type;

/// The newest Kubernetes minor version whose CEL environment celgate knows (1.37, which
/// adds `includes`); the default compatibility version.
pub const NEWEST_MINOR: u16 = 37;

/// A declared variable.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub ty: Type,
    pub kind: VarKind,
}

#[derive(Debug, Clone)]
pub enum VarKind {
    Plain,
    /// A map of composited variables, each computed on first use: the fields and their
    /// types, in declaration order.
    Lazy(Vec<(String, Type)>),
}

/// Everything an expression is compiled against.
#[derive(Debug, Clone)]
pub struct Env {
    /// Kubernetes minor version (1.N): a library is available when it was introduced at or
    /// before this version (the stored-expressions environment at this compatibility version).
    pub version: u16,
    /// Full type checking (off only for conformance tests marked `disable_check`).
    pub check_types: bool,
    /// Fold constant literals and conversions at compile time, as cel-go's `OptOptimize`.
    pub optimize: bool,
    /// Kubernetes' `HomogeneousAggregateLiterals`: mixed-type list and map literals are
    /// compile errors. Plain CEL (the cel-spec suite) allows them.
    pub homogeneous_literals: bool,
    variables: Vec<Variable>,
}

impl Default for Env {
    fn default() -> Self {
        Env::new(NEWEST_MINOR)
    }
}

impl Env {
    pub fn new(version: u16) -> Self {
        Env {
            version,
            check_types: true,
            optimize: true,
            homogeneous_literals: true,
            variables: Vec::new(),
        }
    }

    /// Declares a variable; returns its slot in the activation.
    pub fn declare(&mut self, name: &str, ty: Type) -> usize {
        self.variables.push(Variable {
            name: name.to_string(),
            ty,
            kind: VarKind::Plain,
        });
        self.variables.len() - 1
    }

    /// Declares a map of lazily computed variables (`variables` in a policy).
    pub fn declare_lazy(&mut self, name: &str, fields: Vec<(String, Type)>) -> usize {
        self.variables.push(Variable {
            name: name.to_string(),
            ty: Type::Dyn,
            kind: VarKind::Lazy(fields),
        });
        self.variables.len() - 1
    }

    pub fn variable(&self, name: &str) -> Option<(usize, &Variable)> {
        self.variables
            .iter()
            .enumerate()
            .find(|(_, v)| v.name == name)
    }

    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Env>();
    }
}
