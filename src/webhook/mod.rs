//! The ValidatingWebhookConfiguration that sends requests to celgate: which `rules` it needs
//! so that the API server calls celgate for every request a loaded binding can decide, and
//! for as few others as that allows ([`rules`], pure, on the engine's snapshot). The
//! certificate controller's client keeps them in the cluster (`certs::rules`); `celgate
//! webhook-rules` prints them for a configuration kept in Git.

pub mod rules;
