//! The compile environment: the Kubernetes version whose libraries are available and the
//! declared variables. [`Env::compile`] (in [`super::program`]) compiles against it.

use std::collections::HashMap;

use super::types::Type;

/// The newest Kubernetes minor version whose CEL environment celgate knows (1.37, which
/// adds `includes`); the default compatibility version.
pub const NEWEST_MINOR: u16 = 37;

/// The oldest Kubernetes minor version celgate accepts: the first with the Authz library,
/// the oldest environment the library tables model (ValidatingAdmissionPolicy itself is
/// alpha from 1.26 and read by celgate from v1beta1, 1.28).
pub const OLDEST_MINOR: u16 = 27;

/// Why a text is not a Kubernetes version celgate can evaluate for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The text is not `1.N`, `v1.N` or `v1.N.P[-suffix]`.
    #[error("{text:?} is not a Kubernetes version such as 1.{newest} or v1.{newest}", newest = NEWEST_MINOR)]
    NotAVersion {
        /// The text as given.
        text: String,
    },
    /// A version, but another major or a minor outside [`OLDEST_MINOR`]..=[`NEWEST_MINOR`].
    #[error("Kubernetes {text} is not supported: celgate knows 1.{oldest} to 1.{newest}", oldest = OLDEST_MINOR, newest = NEWEST_MINOR)]
    Unsupported {
        /// The text as given.
        text: String,
    },
}

/// Reads a Kubernetes version as users write it and kubectl prints it: `1.30`, `v1.30`,
/// `v1.30.2`, `v1.30.2-gke.1` (the minor is what selects the environment). Refuses other
/// majors and minors outside [`OLDEST_MINOR`]..=[`NEWEST_MINOR`], saying which are known.
pub fn parse_k8s_version(text: &str) -> Result<u16, VersionError> {
    let bare = text.trim();
    let bare = bare.strip_prefix('v').unwrap_or(bare);
    let mut parts = bare.splitn(3, '.');
    let (major, minor, rest) = (parts.next(), parts.next(), parts.next());
    // A patch, if any, is digits followed by an optional pre-release or build suffix.
    let patch_ok = rest.is_none_or(|r| {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0
            && r[digits..]
                .chars()
                .next()
                .is_none_or(|c| c == '-' || c == '+')
    });
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let minor = match (major, minor) {
        (Some(ma), Some(mi)) if numeric(ma) && numeric(mi) && patch_ok => {
            ma.parse::<u16>().ok().zip(mi.parse::<u16>().ok())
        }
        _ => None,
    };
    match minor {
        None => Err(VersionError::NotAVersion { text: text.into() }),
        Some((1, m)) if (OLDEST_MINOR..=NEWEST_MINOR).contains(&m) => Ok(m),
        Some(_) => Err(VersionError::Unsupported { text: text.into() }),
    }
}

/// A declared variable.
#[derive(Debug, Clone)]
pub struct Variable {
    /// The name expressions use.
    pub name: String,
    /// The declared type.
    pub ty: Type,
    /// Plain, or a map of lazily computed fields.
    pub kind: VarKind,
}

/// How a variable's value is found.
#[derive(Debug, Clone)]
pub enum VarKind {
    /// A value in the activation's slot.
    Plain,
    /// A map of composited variables, each computed on first use: the fields and their
    /// types, in declaration order. Used bare, it is an object of type [`VARIABLES_TYPE`].
    Lazy(LazyFields),
}

/// The composited variables' names and types in declaration order, with an index by name:
/// a policy may declare thousands of variables, each expression naming some of them.
#[derive(Debug, Clone, Default)]
pub struct LazyFields {
    fields: Vec<(String, Type)>,
    index: HashMap<String, usize>,
}

impl LazyFields {
    /// Adds a field; a name declared twice keeps its first place (as a search in order
    /// finds it).
    fn push(&mut self, name: String, ty: Type) {
        count_lazy_field_copies(1);
        self.index.entry(name.clone()).or_insert(self.fields.len());
        self.fields.push((name, ty));
    }

    /// The place of the field `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The fields and their types, in declaration order.
    pub fn fields(&self) -> &[(String, Type)] {
        &self.fields
    }
}

/// The type name of the composited variables as a whole, as Kubernetes' composition
/// environment declares it (`type(variables)`).
pub const VARIABLES_TYPE: &str = "kubernetes.variables";

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
    /// The MutatingAdmissionPolicy patch types (`Object`, `Object.<path>`, `JSONPatch`) and
    /// `jsonpatch.escapeKey`: set by [`crate::mutation::map_env`] only.
    patch_types: bool,
    variables: Vec<Variable>,
}

impl Default for Env {
    fn default() -> Self {
        Env::new(NEWEST_MINOR)
    }
}

impl Env {
    /// An environment of Kubernetes 1.`version` with no variable, type checking, constant
    /// folding and Kubernetes' homogeneous literals on.
    pub fn new(version: u16) -> Self {
        Env {
            version,
            check_types: true,
            optimize: true,
            homogeneous_literals: true,
            patch_types: false,
            variables: Vec::new(),
        }
    }

    /// Whether the MutatingAdmissionPolicy patch types and library are declared (Kubernetes'
    /// `HasPatchTypes`; see [`crate::mutation`]).
    pub fn has_patch_types(&self) -> bool {
        self.patch_types
    }

    /// Declares the patch types and library (only [`crate::mutation::map_env`] does).
    pub(crate) fn declare_patch_types(&mut self) {
        self.patch_types = true;
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
        let mut lazy = LazyFields::default();
        for (n, ty) in fields {
            lazy.push(n, ty);
        }
        self.variables.push(Variable {
            name: name.to_string(),
            ty: Type::Dyn,
            kind: VarKind::Lazy(lazy),
        });
        self.variables.len() - 1
    }

    /// Adds the field `name` to the lazy variables declared at `slot` (a policy's next
    /// variable, seen by the expressions compiled after it); nothing if `slot` is not one.
    pub fn add_lazy_field(&mut self, slot: usize, name: &str, ty: Type) {
        if let Some(Variable {
            kind: VarKind::Lazy(lazy),
            ..
        }) = self.variables.get_mut(slot)
        {
            lazy.push(name.to_string(), ty);
        }
    }

    /// The variable called `name` and its slot.
    pub fn variable(&self, name: &str) -> Option<(usize, &Variable)> {
        self.variables
            .iter()
            .enumerate()
            .find(|(_, v)| v.name == name)
    }

    /// The declared variables, in slot order (an activation has one value per variable).
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }
}

#[cfg(any(test, feature = "test-counters"))]
thread_local! {
    static LAZY_FIELD_COPIES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts variable declarations handed to environments (for a test that their number grows
/// linearly with a policy's variables).
fn count_lazy_field_copies(_n: usize) {
    #[cfg(any(test, feature = "test-counters"))]
    LAZY_FIELD_COPIES.with(|c| c.set(c.get() + _n));
}

#[cfg(any(test, feature = "test-counters"))]
#[doc(hidden)]
pub fn lazy_field_copies() -> usize {
    LAZY_FIELD_COPIES.with(|c| c.get())
}

#[cfg(any(test, feature = "test-counters"))]
#[doc(hidden)]
pub fn reset_lazy_field_copies() {
    LAZY_FIELD_COPIES.with(|c| c.set(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Env>();
    }

    #[test]
    fn versions_as_written_and_as_kubectl_prints_them() {
        for (text, minor) in [
            ("1.30", 30),
            ("v1.30", 30),
            ("v1.30.2", 30),
            ("v1.32.5-gke.1014001", 32),
            ("1.33.0+k3s1", 33),
            (" 1.27 ", 27),
            ("1.37", 37),
        ] {
            assert_eq!(parse_k8s_version(text), Ok(minor), "{text}");
        }
        for text in ["1.0", "2.5", "1.26", "1.38", "v2.30"] {
            let e = parse_k8s_version(text).unwrap_err().to_string();
            assert!(e.contains("celgate knows 1.27 to 1.37"), "{text}: {e}");
        }
        for text in [
            "", "1", "1.", "x1.30", "1.30x", "1.30.", "1.30.x", "v", "1.-3",
        ] {
            let e = parse_k8s_version(text).unwrap_err().to_string();
            assert!(e.contains("is not a Kubernetes version"), "{text}: {e}");
        }
        // The wording the CLI prints.
        assert_eq!(
            parse_k8s_version("x").unwrap_err().to_string(),
            "\"x\" is not a Kubernetes version such as 1.37 or v1.37"
        );
        assert_eq!(
            parse_k8s_version("v1.26.3").unwrap_err().to_string(),
            "Kubernetes v1.26.3 is not supported: celgate knows 1.27 to 1.37"
        );
    }
}
