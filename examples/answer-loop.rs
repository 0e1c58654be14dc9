//! `answer-loop POLICY_DIR REVIEW.json N`: answers one AdmissionReview body N times on the
//! snapshot of a policy folder, as the server's evaluation does (`review::answer` with a
//! deadline, which also encodes the answer), for instruction counts of the engine's share
//! of a review under callgrind. Profile only `run`:
//! `valgrind --tool=callgrind --toggle-collect='answer_loop::run' target/release/examples/answer-loop examples/policies allowed.json 1000`.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use celgate::admission::AdmitContext;
use celgate::policy::snapshot::Snapshot;

/// The server's allocator, so that counts include what the server's allocations cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[inline(never)]
fn run(snapshot: &Snapshot, body: &[u8], n: usize) -> Result<usize, String> {
    let mut bytes = 0;
    for _ in 0..n {
        let mut context = AdmitContext::default();
        context.limits.deadline = Some(Instant::now() + Duration::from_secs(10));
        let answer = celgate::review::answer(snapshot, body, &context, Default::default())
            .map_err(|e| e.to_string())?;
        bytes += answer.body.len();
    }
    Ok(bytes)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, review, n] = args.as_slice() else {
        eprintln!("usage: answer-loop POLICY_DIR REVIEW.json N");
        return ExitCode::from(2);
    };
    let result = (|| {
        let n: usize = n.parse().map_err(|e| format!("N: {e}"))?;
        let load =
            celgate::source::folder::load(Path::new(dir), 1 << 20).map_err(|e| e.to_string())?;
        let snapshot = celgate::source::snapshot(load.objects, celgate::cel::NEWEST_MINOR, true)
            .map_err(|e| e.to_string())?;
        let body = std::fs::read(review).map_err(|e| format!("{review}: {e}"))?;
        run(&snapshot, &body, n)
    })();
    match result {
        Ok(bytes) => {
            println!("{bytes} bytes answered");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("answer-loop: {e}");
            ExitCode::FAILURE
        }
    }
}
