//! The webhook rules controller (`celgate serve --webhook-rules dynamic`): beside the
//! caBundle, it keeps the `rules` of every webhook of the certificate controller's
//! ValidatingWebhookConfiguration to what the served snapshot's ValidatingAdmissionPolicy
//! bindings can match, and those of its MutatingWebhookConfiguration, when there is one, to
//! what the MutatingAdmissionPolicy bindings can match ([`crate::webhook::rules`], by
//! [`Phase`]), so that the API server calls celgate only for requests a policy can decide.
//!
//! The API server only sends what the rules select, so a snapshot is served only once every
//! configuration covers it (each for its own phase): each new snapshot first widens the rules to what the served one
//! and the new one match (old ∪ new), then is handed to the server; narrowing to the new
//! one alone waits for the next check, after the snapshot is live. Until the widening is
//! written (the API server down, a conflict, RBAC) the previous snapshot keeps serving, and
//! a newer snapshot replaces the waiting one. Every `check_every` the rules are set again to
//! what the served snapshot matches (re-widened when someone narrowed them, narrowed once
//! nothing needs the extra). With several replicas, one whose snapshot lags may narrow
//! away what a newer one added, until that one's next check widens again: the lagging
//! replica itself does not enforce the new binding meanwhile either.
//!
//! The same goes for the [`Hints`] (a namespaceSelector or objectSelector every binding
//! requires): added to the configuration's own selectors (the chart's excluded namespaces
//! stay), widened with the rules (a selector that differs between the served and the new
//! snapshot is dropped until the narrowing) and narrowed with them. What celgate added is
//! recorded in the annotation [`HINTS_ANNOTATION`], so that the next write takes exactly that
//! away again and leaves the rest of the selectors as their owner wrote them.
//!
//! Writes are replaces conditional on the resourceVersion read, as for the caBundle: a
//! conflict reads again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::model::LabelSelector;
use crate::policy::snapshot::Snapshot;
use crate::webhook::rules::{with_hint, without_hint, Hints, Phase, RuleSet, WebhookRule};

/// The configuration's annotation holding the hints celgate added to its webhooks' selectors
/// (JSON of [`Hints`]).
pub const HINTS_ANNOTATION: &str = "celgate.dev/selector-hints";

/// Why the rules could not be written (retried on the next check).
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    /// Other writers kept changing the configuration.
    #[error("gave up after repeated conflicts")]
    Conflicts,
}

/// How the configuration's rules are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// To cover the rules given, keeping whatever else they select.
    Widen,
    /// To exactly the rules given.
    Exact,
}

/// What installs a snapshot in the server.
pub type Install = Arc<dyn Fn(Snapshot) + Send + Sync>;

/// A running rules controller: snapshots go through [`Self::publish`]; dropping it stops
/// the loop (a snapshot still waiting is dropped with it).
pub struct RulesHandle {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for RulesHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RulesHandle {
    /// Hands a new snapshot over: it is installed once the configuration covers it.
    pub fn publish(&self, snapshot: Snapshot) {
        // A poisoned lock only means a panic elsewhere while it was held: the slot is still
        // a valid Option.
        *self
            .shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(snapshot);
        self.shared.wake.notify_one();
    }
}

struct Shared {
    pending: Mutex<Option<Snapshot>>,
    wake: Notify,
}

/// Starts the controller for the `configurations` (each named, for its phase: see
/// [`super::Options::configurations`]), installing with `install`.
pub fn start(
    client: Client,
    configurations: Vec<(Phase, String)>,
    check_every: Duration,
    install: Install,
) -> RulesHandle {
    let shared = Arc::new(Shared {
        pending: Mutex::new(None),
        wake: Notify::new(),
    });
    let controller = Controller {
        targets: configurations
            .into_iter()
            .map(|(phase, name)| Target {
                api: Api::all_with(client.clone(), &super::webhook_resource(phase)),
                kind: super::webhook_kind(phase),
                phase,
                name,
            })
            .collect(),
        check_every,
        install,
        shared: shared.clone(),
    };
    RulesHandle {
        shared,
        task: tokio::spawn(controller.run()),
    }
}

/// One webhook configuration whose rules follow the snapshot.
struct Target {
    api: Api<DynamicObject>,
    name: String,
    kind: &'static str,
    phase: Phase,
}

/// What one configuration should select: its rules and selector hints.
type Wanted = (RuleSet, Hints);

struct Controller {
    targets: Vec<Target>,
    check_every: Duration,
    install: Install,
    shared: Arc<Shared>,
}

/// A conditional write lost to another writer.
struct Conflict;

impl Controller {
    async fn run(self) {
        // What the served snapshot matches, per target; `None` before the first.
        let mut served: Option<Vec<Wanted>> = None;
        loop {
            let pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            match pending {
                Some(snapshot) => {
                    let new: Vec<Wanted> = self
                        .targets
                        .iter()
                        .map(|t| {
                            (
                                RuleSet::of_phase(&snapshot, t.phase),
                                Hints::of_phase(&snapshot, t.phase),
                            )
                        })
                        .collect();
                    let want: Vec<Wanted> = match &served {
                        None => new.clone(),
                        Some(old) => old
                            .iter()
                            .zip(&new)
                            .map(|((rules, hints), (r, h))| (rules.union(r), hints.union(h)))
                            .collect(),
                    };
                    let mut widened = Ok(());
                    for (target, want) in self.targets.iter().zip(&want) {
                        widened = self.set(target, want, Write::Widen).await;
                        if widened.is_err() {
                            break;
                        }
                    }
                    match widened {
                        Ok(()) => {
                            (self.install)(snapshot);
                            served = Some(new);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "webhook rules not widened for the new policies: the previous snapshot keeps serving, retrying");
                            // Put back, unless a newer one came meanwhile.
                            let mut slot = self
                                .shared
                                .pending
                                .lock()
                                .unwrap_or_else(|e| e.into_inner());
                            if slot.is_none() {
                                *slot = Some(snapshot);
                            }
                        }
                    }
                }
                None => {
                    for (target, want) in self.targets.iter().zip(served.iter().flatten()) {
                        if let Err(e) = self.set(target, want, Write::Exact).await {
                            tracing::warn!(error = %e, webhook = %target.name, kind = target.kind, "webhook rules not updated, retrying");
                        }
                    }
                }
            }
            tokio::select! {
                _ = self.shared.wake.notified() => {}
                _ = tokio::time::sleep(self.check_every) => {}
            }
        }
    }

    /// Sets the rules of every webhook of `target`, read again after a conflict. A
    /// configuration that does not exist has nothing to guard.
    async fn set(&self, target: &Target, want: &Wanted, how: Write) -> Result<(), RulesError> {
        for _ in 0..5 {
            if self.try_set(target, want, how).await?.is_ok() {
                return Ok(());
            }
        }
        Err(RulesError::Conflicts)
    }

    async fn try_set(
        &self,
        target: &Target,
        (rules, hints): &Wanted,
        how: Write,
    ) -> Result<Result<(), Conflict>, RulesError> {
        let Some(mut w) =
            target
                .api
                .get_opt(&target.name)
                .await
                .map_err(|source| RulesError::Api {
                    what: match target.phase {
                        Phase::Validating => "reading the ValidatingWebhookConfiguration",
                        Phase::Mutating => "reading the MutatingWebhookConfiguration",
                    },
                    source,
                })?
        else {
            tracing::debug!(webhook = %target.name, kind = target.kind, "webhook configuration not found: no rules to keep");
            return Ok(Ok(()));
        };
        // What celgate added last time (none when the annotation is missing or unreadable:
        // the selectors are then taken as their owner wrote them).
        let added: Hints = w
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HINTS_ANNOTATION))
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        let next_hints = match how {
            // What is there already selects no less than `added ∪ hints`.
            Write::Widen => added.union(hints),
            Write::Exact => hints.clone(),
        };
        let Some(hooks) = w.data.get_mut("webhooks").and_then(Json::as_array_mut) else {
            return Ok(Ok(()));
        };
        let mut changed = false;
        for hook in hooks.iter_mut() {
            let current: Vec<WebhookRule> =
                serde_json::from_value(hook["rules"].clone()).unwrap_or_default();
            let next = match how {
                Write::Widen if RuleSet::of_rules(&current).covers(rules) => current.clone(),
                Write::Widen => RuleSet::of_rules(&current).union(rules).rules(),
                Write::Exact => rules.rules(),
            };
            if next != current {
                match serde_json::to_value(&next) {
                    Ok(v) => hook["rules"] = v,
                    // Plain strings and lists: serializing cannot fail.
                    Err(_) => continue,
                }
                changed = true;
            }
            for (field, was, now) in [
                (
                    "namespaceSelector",
                    &added.namespace_selector,
                    &next_hints.namespace_selector,
                ),
                (
                    "objectSelector",
                    &added.object_selector,
                    &next_hints.object_selector,
                ),
            ] {
                changed |= set_selector(hook, field, was.as_ref(), now.as_ref());
            }
        }
        if next_hints != added {
            let annotations = w.metadata.annotations.get_or_insert_with(Default::default);
            match serde_json::to_string(&next_hints) {
                Ok(text) => {
                    annotations.insert(HINTS_ANNOTATION.into(), text);
                    changed = true;
                }
                // Plain strings and lists: serializing cannot fail.
                Err(_) => return Ok(Ok(())),
            }
        }
        if !changed {
            return Ok(Ok(()));
        }
        match target
            .api
            .replace(&target.name, &PostParams::default(), &w)
            .await
        {
            Ok(_) => {
                tracing::info!(webhook = %target.name, kind = target.kind, rules = rules.rules().len(), namespace_hint = next_hints.namespace_selector.is_some(), object_hint = next_hints.object_selector.is_some(), widen = how == Write::Widen, "webhook rules written");
                Ok(Ok(()))
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Err(Conflict)),
            Err(source) => Err(RulesError::Api {
                what: match target.phase {
                    Phase::Validating => "writing the ValidatingWebhookConfiguration's rules",
                    Phase::Mutating => "writing the MutatingWebhookConfiguration's rules",
                },
                source,
            }),
        }
    }
}

/// Replaces, in `hook[field]`, the hint `was` (what celgate added before) by `now`; whether
/// the selector changed. An unreadable selector is left alone.
fn set_selector(
    hook: &mut Json,
    field: &str,
    was: Option<&LabelSelector>,
    now: Option<&LabelSelector>,
) -> bool {
    let live: LabelSelector = match &hook[field] {
        Json::Null => LabelSelector::default(),
        v => match serde_json::from_value(v.clone()) {
            Ok(s) => s,
            Err(_) => return false,
        },
    };
    let next = with_hint(&without_hint(&live, was), now);
    if next == live {
        return false;
    }
    let mut v = serde_json::Map::new();
    if !next.match_labels.is_empty() {
        v.insert("matchLabels".into(), serde_json::json!(next.match_labels));
    }
    if !next.match_expressions.is_empty() {
        v.insert(
            "matchExpressions".into(),
            serde_json::json!(next.match_expressions),
        );
    }
    hook[field] = Json::Object(v);
    true
}
