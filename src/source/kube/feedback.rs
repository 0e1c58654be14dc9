//! Policy status feedback as Kubernetes Events (kubernetes/kubernetes#117263): each problem
//! [`crate::source::problems`] finds is reported once as a Warning Event on the policy or
//! binding itself, so that its author sees it on `kubectl describe` as soon as the object is
//! applied. Events are posted with kube-runtime's `Recorder` (client-go's
//! `tools/events` EventRecorder).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter as EventReporter};
use kube::Client;

// The problem types moved to the neutral `source::problems`; kept here at their old paths.
pub use crate::source::problems::{problems, ParamKey, Problem, NAMESPACE_NOT_WATCHED, REASONS};

/// Publishes each new problem once as a Warning Event on its object.
pub struct Reporter {
    recorder: Recorder,
    reported: BTreeSet<Problem>,
}

impl Reporter {
    pub fn new(client: Client, instance: &str) -> Reporter {
        let reporter = EventReporter {
            controller: "celgate".into(),
            instance: (!instance.is_empty()).then(|| instance.to_string()),
        };
        Reporter {
            recorder: Recorder::new(client, reporter),
            reported: BTreeSet::new(),
        }
    }

    /// Reports the problems not reported yet; a problem that went away and comes back is
    /// reported again.
    pub async fn report(&mut self, problems: &[Problem]) {
        let current: BTreeSet<Problem> = problems.iter().cloned().collect();
        for p in current.difference(&self.reported) {
            let reference = ObjectReference {
                api_version: Some(p.api_version.clone()),
                kind: Some(p.kind.clone()),
                name: Some(p.name.clone()),
                uid: (!p.uid.is_empty()).then(|| p.uid.clone()),
                ..Default::default()
            };
            let event = Event {
                type_: EventType::Warning,
                reason: p.reason.into(),
                note: Some(p.message.clone()),
                action: "Compile".into(),
                secondary: None,
            };
            match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                self.recorder.publish(&event, &reference),
            )
            .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(object = %p.name, reason = p.reason, error = %e, "cannot publish event")
                }
                Err(_) => {
                    tracing::warn!(object = %p.name, reason = p.reason, "publishing an event timed out")
                }
            }
        }
        self.reported = current;
    }
}
