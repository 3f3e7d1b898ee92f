fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opts = placer_bench::BenchOptions {
        filter: args.get(1).cloned(),
        quick: args.iter().any(|a| a == "--quick"),
        baseline_all: false,
        progress: false,
    };
    let r = placer_bench::run_suite(&opts).expect("suite");
    print!("{}", placer_bench::report::render_text(&r));
}
