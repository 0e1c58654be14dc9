//! PLACEHOLDER until the m-jp branch lands: the whole object replaced.

use serde_json::{json, Value as Json};

/// A JSON patch from `before` to `after`.
pub fn diff(_before: &Json, after: &Json) -> Json {
    json!([{"op": "replace", "path": "", "value": after}])
}
