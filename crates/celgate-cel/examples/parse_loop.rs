//! Parses one JSON file N times, for instruction counts of the document parser under
//! callgrind: `parse_loop FILE MODE N` with MODE `serde` (the serde_json-driven builder),
//! `full`, `p1` (only `request.object.metadata.name` read) or `p5` (the 10 PSS validations'
//! reads). Profile only [`run`]: `valgrind --tool=callgrind --toggle-collect=parse_loop::run`.

use celgate_cel::json::Doc;
use celgate_cel::projection::{Projection, Projections};

fn routes(case: &str) -> Projections {
    let mut p = Projection::none();
    if case == "p1" {
        p.field_mut("metadata").field_mut("name").set_whole();
    } else {
        let spec = p.field_mut("spec");
        for f in ["hostNetwork", "hostPID", "hostIPC", "securityContext"] {
            spec.field_mut(f).set_whole();
        }
        let c = spec.field_mut("containers").each_mut();
        c.field_mut("securityContext").set_whole();
        c.field_mut("ports").set_whole();
        spec.field_mut("volumes").each_mut().field_mut("hostPath");
    }
    let mut r = Projections::new();
    r.project(&["request", "object"], &p);
    r.project(&["request", "oldObject"], &Projection::none());
    r
}

#[inline(never)]
fn run(bytes: &[u8], mode: &str, routes: &Projections, n: usize) -> usize {
    let mut total = 0;
    for _ in 0..n {
        let doc = match mode {
            "serde" => Doc::parse_serde(bytes),
            "full" => Doc::parse(bytes),
            _ => Doc::parse_projected(bytes, routes),
        };
        total += doc.map(|d| d.root().index() as usize + 1).unwrap_or(0);
    }
    total
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).expect("a JSON file");
    let mode = args[2].as_str();
    let n: usize = args[3].parse().expect("a count");
    let routes = routes(mode);
    // One parse outside the profiled loop warms the allocator.
    run(&bytes, mode, &routes, 1);
    println!("{}", run(&bytes, mode, &routes, n));
}
