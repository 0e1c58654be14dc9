//! One replica at a time reports Events: a `coordination.k8s.io` Lease names the reporter.
//! Every replica watches and serves; only the Lease holder publishes, so that two replicas do
//! not post every Warning twice. A holder that stops renewing loses the Lease once it expires,
//! and another replica takes over (and reports the current problems once more).
//!
//! As client-go's leader election with `ReleaseOnCancel`, a holder that shuts down
//! gracefully releases the Lease: it clears `holderIdentity` and sets
//! `leaseDurationSeconds` to 1, with a replace conditioned on the resourceVersion it read
//! (so it never clears another holder's record). A Lease without a holder is free: another
//! replica takes it at its next renewal instead of waiting for the duration to expire.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

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
    /// How long a graceful shutdown waits for the release (`--lease-release-timeout`):
    /// well below the pod's grace period, since the drain runs beside it.
    pub release_timeout: Duration,
}

/// Whether this replica holds the Lease; updated by [`hold`].
#[derive(Debug, Default)]
pub struct Leadership {
    leader: AtomicBool,
    /// Rounds of [`hold`] completed, each after `leader` was updated: a reader that sees `n`
    /// rounds then reads `leader` gets the outcome of round `n` or a later one.
    rounds: AtomicU64,
    /// Times this replica acquired the Lease: a writer that sees another term than the one it
    /// started with lost the Lease in between, even if it holds it again.
    terms: AtomicU64,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    /// The current term while this replica holds the Lease (see `Leadership::terms`).
    pub fn term(&self) -> Option<u64> {
        self.is_leader().then(|| self.terms.load(Ordering::Acquire))
    }

    /// How many rounds of trying to hold the Lease have completed.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Acquire)
    }
}

/// Tries to acquire and keep the Lease until `stop` turns true (or its sender is dropped),
/// then stops leading and releases the Lease if it held it; or until the task is aborted.
pub async fn hold(
    client: Client,
    options: LeaseOptions,
    leadership: Arc<Leadership>,
    mut stop: watch::Receiver<bool>,
) {
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
        if leader && !leadership.is_leader() {
            // Before `leader`: whoever sees it set sees the new term.
            leadership.terms.fetch_add(1, Ordering::Release);
        }
        leadership.leader.store(leader, Ordering::Release);
        leadership.rounds.fetch_add(1, Ordering::Release);
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            _ = tokio::time::sleep(options.renew) => {}
        }
    }
    // Stop leading first: nothing is published once another replica may hold the Lease.
    let was_leader = leadership.leader.swap(false, Ordering::AcqRel);
    leadership.rounds.fetch_add(1, Ordering::Release);
    if !was_leader {
        return;
    }
    match tokio::time::timeout(options.release_timeout, release(&api, &options)).await {
        Ok(Ok(true)) => tracing::info!(lease = %options.name, "lease released"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, lease = %options.name, "lease not released; another replica takes it over once it expires")
        }
        Err(_) => {
            tracing::warn!(lease = %options.name, "lease not released in time; another replica takes it over once it expires")
        }
    }
}

/// Releases the Lease if this replica holds it (as client-go's `ReleaseOnCancel`): no
/// holder, a duration of one second; `Ok(true)` once released.
async fn release(api: &Api<Lease>, o: &LeaseOptions) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(&o.name).await? else {
        return Ok(false);
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(o.identity.as_str()) {
        return Ok(false);
    }
    let now = MicroTime(Timestamp::now());
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    // Conditioned on the resourceVersion read above: a replica that took the Lease over
    // meanwhile keeps it (a conflict).
    conflict_is_false(api.replace(&o.name, &PostParams::default(), &lease).await)
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
    // Released by its last holder: free at once.
    let free = spec.holder_identity.as_deref().is_none_or(str::is_empty);
    let expired = spec.renew_time.as_ref().is_none_or(|t| {
        let duration =
            SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(seconds)));
        t.0.checked_add(duration).map_or(true, |end| end < now)
    });
    if !held_by_me && !free && !expired {
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
