// Temporary debugging helper (to be deleted).
fn main() {
    let path = std::env::args().nth(1).expect("file");
    match placer_sim::simulate_file(&path, &placer_sim::RunOptions::default()) {
        Ok(placer_sim::Outcome::Ran(r)) => {
            for (at, f) in r.failures() {
                println!("FAIL {at}: {f}");
            }
            for e in &r.events {
                println!("event {:?} {} {}: {}", e.regarding.name, e.type_, e.reason, e.note);
            }
            for o in &r.objects {
                if let placer_cluster::Object::PodGroup(pg) = o {
                    println!("pg {:?} {:?}", pg.metadata.name, pg.status);
                }
            }
            if let Some(m) = &r.metrics { println!("{}", m.lines().filter(|l| l.contains("preempt")).collect::<Vec<_>>().join("\n")); }
            println!("passed={}", r.passed());
        }
        other => println!("{other:?}"),
    }
}
