//! One replica at a time reports Events: a `coordination.k8s.io` Lease names the reporter.
//! Every replica watches and serves; only the Lease holder publishes, so that two replicas do
//! not post every Warning twice. A holder that stops renewing loses the Lease once it expires,
//! and another replica takes over (and reports the current problems once more).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};

/// The Lease and how it is held.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a holder keeps the Lease without renewing it.
    pub duration: Duration,
    /// How often the holder renews, and the others check.
    pub renew: Duration,
}

/// Whether this replica holds the Lease; updated by [`hold`].
#[derive(Debug, Default)]
pub struct Leadership {
    leader: AtomicBool,
    /// Rounds of [`hold`] completed, each after `leader` was updated: a reader that sees `n`
    /// rounds then reads `leader` gets the outcome of round `n` or a later one.
    rounds: AtomicU64,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    /// How many rounds of trying to hold the Lease have completed.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Acquire)
    }
}

/// Tries to acquire and keep the Lease until the task is aborted.
pub async fn hold(client: Client, options: LeaseOptions, leadership: Arc<Leadership>) {
    let api: Api<Lease> = Api::namespaced(client, &options.namespace);
    loop {
        let leader = match tokio::time::timeout(options.renew, try_hold(&api, &options)).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "lease not renewed");
                false
            }
            Err(_) => false,
        };
        if leader != leadership.is_leader() {
            tracing::info!(leader, lease = %options.name, "event reporting leadership changed");
        }
        leadership.leader.store(leader, Ordering::Release);
        leadership.rounds.fetch_add(1, Ordering::Release);
        tokio::time::sleep(options.renew).await;
    }
}

/// One round: create, renew or take over the Lease; `Ok(true)` when this replica holds it.
async fn try_hold(api: &Api<Lease>, o: &LeaseOptions) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let seconds = i32::try_from(o.duration.as_secs())
        .unwrap_or(i32::MAX)
        .max(1);
    let mine = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
        holder_identity: Some(o.identity.clone()),
        lease_duration_seconds: Some(seconds),
        acquire_time: acquired.or(Some(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let Some(mut lease) = api.get_opt(&o.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(o.name.clone()),
                namespace: Some(o.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(mine(0, None)),
        };
        return conflict_is_false(api.create(&PostParams::default(), &lease).await);
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let held_by_me = spec.holder_identity.as_deref() == Some(o.identity.as_str());
    let expired = spec.renew_time.as_ref().is_none_or(|t| {
        let duration =
            SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(seconds)));
        t.0.checked_add(duration).map_or(true, |end| end < now)
    });
    if !held_by_me && !expired {
        return Ok(false);
    }
    let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!held_by_me);
    let acquired = if held_by_me { spec.acquire_time } else { None };
    lease.spec = Some(mine(transitions, acquired));
    // The resourceVersion read above makes the replace conditional: of two replicas taking
    // over at once, one gets a conflict.
    conflict_is_false(api.replace(&o.name, &PostParams::default(), &lease).await)
}

fn conflict_is_false(r: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
