//! Calls to the API server from the evaluator's threads, which are synchronous: the request
//! runs on the tokio runtime and the caller waits for its answer on a channel, up to a
//! timeout. Unlike `Handle::block_on`, this cannot panic whatever thread it is called from.

use std::future::Future;
use std::time::Duration;

use super::CallError;

/// Runs `request` on `runtime` and waits up to `timeout` for it; `what` names it in errors.
pub fn call<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    timeout: Duration,
    what: &'static str,
    request: impl Future<Output = Result<T, kube::Error>> + Send + 'static,
) -> Result<T, CallError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let timed_out = move || CallError::TimedOut { what, timeout };
    runtime.spawn(async move {
        let result = tokio::time::timeout(timeout, request)
            .await
            .map_err(|_| timed_out())
            .and_then(|r| r.map_err(|source| CallError::Failed { what, source }));
        let _ = tx.send(result);
    });
    // The task times out by itself; the margin covers its scheduling.
    rx.recv_timeout(timeout + Duration::from_millis(500))
        .map_err(|_| timed_out())?
}
