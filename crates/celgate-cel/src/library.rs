//! The function table: every function an expression may call, by name, with its overloads
//! from every library: CEL's standard library and cel-go's extensions ([`super::stdlib`]), then
//! the Kubernetes libraries ([`super::k8s`]). Built once, on first use.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::overload::{Builder, Function};

/// All functions, by name.
pub fn functions() -> &'static HashMap<&'static str, Function> {
    static TABLE: OnceLock<HashMap<&'static str, Function>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut b = Builder::new();
        super::stdlib::register(&mut b);
        super::k8s::register(&mut |name, sigs, imp, cost| b.add(name, sigs, imp, cost));
        super::mutation::register(&mut |name, sigs, imp, cost| b.add(name, sigs, imp, cost));
        b.into_functions()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Signature;

    #[test]
    fn table_builds_and_every_signature_parses() {
        let t = functions();
        assert!(t.contains_key("_+_") && t.contains_key("sets.contains"));
        for f in t.values() {
            for o in &f.overloads {
                assert!(
                    !o.sig.to_string_lossy().contains("unknown"),
                    "{}: {:?}",
                    f.name,
                    o.sig
                );
            }
        }
    }

    trait Lossy {
        fn to_string_lossy(&self) -> String;
    }
    impl Lossy for Signature {
        fn to_string_lossy(&self) -> String {
            let p: Vec<String> = self.params.iter().map(|t| t.to_string()).collect();
            format!("({}) {}", p.join(", "), self.result)
        }
    }
}
