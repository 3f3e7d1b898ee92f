//! The HTML report of `placer bench`'s 10,000-node three-level shape (16 blocks x 25 racks
//! x 25 hosts of 8 GPUs, the `c-three-level` generator's cluster) with a few
//! preferred-rack gangs and one that fits no rack: under 5 MB, and, when `chromium` is
//! installed (`.ci/run` installs the Debian package), rendered headless: the screenshot
//! shows the hierarchy (boxes and PodGroup colours where the SVG is).

use std::path::{Path, PathBuf};
use std::process::Command;

use placer_bench::workloads::three_level;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenario() -> String {
    let cluster = three_level(false).cluster;
    let mut levels: Vec<String> = cluster.levels.iter().map(|l| l.label.to_string()).collect();
    levels.push("kubernetes.io/hostname".into());
    let mut fanout: Vec<String> = cluster.levels.iter().map(|l| l.count.to_string()).collect();
    fanout.push(cluster.hosts.to_string());
    let s = cluster.shape;
    let rack = cluster.levels.last().map_or("", |l| l.label);
    let job = |name: &str, size: u32, ask: &str, run: &str| {
        format!(
            "  - apiVersion: batch/v1\n    kind: Job\n    metadata: {{name: {name}, namespace: bench}}\n    spec:\n      completionMode: Indexed\n      parallelism: {size}\n      completions: {size}\n      template:\n        metadata:\n          annotations: {{kueue.x-k8s.io/podset-{ask}-topology: {rack}, placer.dev/run-time: {run}}}\n        spec:\n          restartPolicy: Never\n          containers: [{{name: w, image: registry.example/w, resources: {{requests: {{cpu: \"8\", memory: 64Gi, nvidia.com/gpu: \"1\"}}, limits: {{nvidia.com/gpu: \"1\"}}}}}}]\n"
        )
    };
    let mut text = format!(
        "name: bench-three-level-report\nscheduler:\n  profile:\n    topologyLevels: [{levels}]\ncluster:\n  generate:\n    levels: [{levels}]\n    fanout: [{fanout}]\n    allocatable: {{cpu: \"{}\", memory: {}Gi, pods: \"{}\", nvidia.com/gpu: \"{}\"}}\nsubmit:\n",
        s.cpu_cores,
        s.memory_gib,
        s.pods,
        s.gpus,
        levels = levels.join(", "),
        fanout = fanout.join(", "),
    );
    for (i, size) in [64u32, 128, 256, 64].iter().enumerate() {
        text.push_str(&job(&format!("t{i}"), *size, "preferred", &format!("{}h", i + 1)));
    }
    text.push_str(&job("too-big", 300, "required", "5h"));
    text.push_str("steps:\n  - advance: 15m\n  - advance: 30m\n");
    text
}

#[test]
fn the_report_of_the_three_level_shape_is_small_and_renders_the_hierarchy() {
    let dir = std::env::temp_dir().join(format!("placer-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("three-level.yaml");
    std::fs::write(&file, scenario()).expect("scenario");
    let html = dir.join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_placer"))
        .args(["simulate", file.to_str().unwrap_or_default(), "--report", html.to_str().unwrap_or_default()])
        .current_dir(workspace())
        .output()
        .expect("run placer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("cluster: 10000 nodes"), "{stdout}");
    let text = std::fs::read_to_string(&html).expect("report");
    assert!(text.len() < 5 * 1024 * 1024, "{} bytes", text.len());
    assert!(text.contains("no rack can hold minCount 300"), "the unschedulable gang with its reason");
    assert!(text.contains("<h2>Timeline</h2>"), "virtual time advanced: a timeline");
    println!("report: {} bytes for 10,000 nodes", text.len());

    if Command::new("chromium").arg("--version").output().is_err() {
        println!(
            "chromium is not installed: the report is not rendered (.ci/run installs the Debian package)"
        );
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let shot = dir.join("shot.png");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,900",
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("run chromium");
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).expect("png")));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("png size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    let channels = info.color_type.samples();
    let (w, h) = (info.width as usize, info.height as usize);
    assert!(w >= 1000 && h >= 800, "{w}x{h}");
    // The hierarchy starts below the headings (about 270 px down): in its area, count
    // pixels that are not the page's white and those in a PodGroup colour (saturated).
    let (mut drawn, mut coloured, mut total) = (0usize, 0usize, 0usize);
    for y in 300..h.min(890) {
        for x in 20..w.min(1180) {
            let i = (y * w + x) * channels;
            let (r, g, b) = (buf[i] as i32, buf[i + 1] as i32, buf[i + 2] as i32);
            total += 1;
            if r < 250 || g < 250 || b < 250 {
                drawn += 1;
            }
            if r.max(g).max(b) - r.min(g).min(b) > 80 {
                coloured += 1;
            }
        }
    }
    println!("hierarchy area: {drawn}/{total} pixels drawn, {coloured} in PodGroup colours");
    assert!(drawn * 4 > total, "the hierarchy's boxes cover the area: {drawn}/{total}");
    assert!(coloured > 500, "PodGroups are drawn in colour: {coloured} pixels");
    let _ = std::fs::remove_dir_all(&dir);
}
