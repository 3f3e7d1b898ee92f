//! An end-to-end test bed: `placer cluster` and `placer serve` as processes on loopback
//! ports, driven with the real `kubectl` when one is installed, else with kube-rs.
//!
//! Reuse it from another integration test of this crate with `mod bed;`:
//!
//! ```ignore
//! let mut bed = Bed::start(BedOptions { scenario: Some(bed::scenario("two-racks.yaml")), ..BedOptions::default() });
//! let _a = bed.serve("replica-a", "");                   // leader election on, lease `placer`
//! bed.create_manifests("gang", &bed::rack_gang("demo", "train", 4, "250m"));
//! bed.wait_for(Duration::from_secs(60), "all bound", |b| b.pods("demo").bound() == 4);
//! ```
//!
//! `BedOptions::cluster_args` passes flags to `placer cluster` (e.g. `--latency 5ms`).
//! Set `PLACER_E2E_KUBECTL` to a kubectl binary, or to `none` to use kube-rs. Every
//! process is killed when the bed is dropped; its directory (logs, kubeconfig, state
//! file) is kept when the test fails and its path printed.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scenario file of `crates/placer/tests/e2e/`.
pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e").join(name)
}

/// How the bed's cluster starts.
#[derive(Debug, Clone, Default)]
pub struct BedOptions {
    pub scenario: Option<PathBuf>,
    /// `--scheduler embedded` instead of `none`.
    pub embedded_scheduler: bool,
    /// More flags for `placer cluster`.
    pub cluster_args: Vec<String>,
}

/// The client that drives the cluster.
#[derive(Debug, Clone)]
pub enum Driver {
    Kubectl(PathBuf),
    KubeRs,
}

/// `kubectl` from `PLACER_E2E_KUBECTL` or `PATH`, if it runs.
pub fn driver() -> Driver {
    let wanted = std::env::var("PLACER_E2E_KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    if wanted == "none" {
        return Driver::KubeRs;
    }
    let runs = Command::new(&wanted)
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if runs {
        Driver::Kubectl(PathBuf::from(wanted))
    } else {
        Driver::KubeRs
    }
}

static BEDS: AtomicUsize = AtomicUsize::new(0);

/// One `placer serve` replica.
pub struct Replica {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Replica {
    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address its `/metrics` endpoint is bound to, from its log (`metricsAddr` has
    /// port 0 in the bed), once it is serving.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        let log = self.log_text();
        let line = log.lines().find(|l| l.contains("serving /metrics"))?;
        let rest = line.split("addr=").nth(1).or_else(|| line.split("\"addr\":\"").nth(1))?;
        rest.split(|c: char| c.is_whitespace() || c == '"').next()?.parse().ok()
    }

    /// `GET path` of its metrics endpoint (`/metrics`, `/readyz`): the body, once it serves.
    pub fn http_get(&self, path: &str) -> Option<String> {
        http_get(self.metrics_addr()?, path)
    }
}

/// A plain HTTP/1.1 `GET` (what `curl` does): the body of a 200 answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return Some(dechunk(body));
    }
    Some(body.to_string())
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// One request the API server logged (`placer_apiserver::server=debug`).
#[derive(Debug, Clone)]
pub struct Logged {
    /// Seconds since midnight (UTC) of the log line.
    pub at: f64,
    pub method: String,
    pub path: String,
    pub query: String,
    pub agent: String,
}

impl Logged {
    /// The (API group, resource[/subresource], verb) an RBAC rule would have to allow;
    /// `None` for discovery and health paths.
    pub fn rbac(&self) -> Option<(String, String, String)> {
        let segs: Vec<&str> = self.path.trim_matches('/').split('/').collect();
        let (group, rest) = match segs.as_slice() {
            ["api", _version, rest @ ..] => (String::new(), rest),
            ["apis", group, _version, rest @ ..] => (group.to_string(), rest),
            _ => return None,
        };
        let (resource, name, sub) = match rest {
            ["namespaces", _ns, resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
            [resource, tail @ ..] => (*resource, tail.first(), tail.get(1)),
            [] => return None,
        };
        let resource = match sub {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        let watch = self.query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
        let verb = match (self.method.as_str(), name.is_some()) {
            ("GET", false) if watch => "watch",
            ("GET", false) => "list",
            ("GET", true) => "get",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", false) => "deletecollection",
            ("DELETE", true) => "delete",
            _ => return None,
        };
        Some((group, resource, verb.to_string()))
    }
}

/// Seconds since midnight of a log line's leading RFC 3339 timestamp.
pub fn log_time(line: &str) -> Option<f64> {
    let t = line.split_whitespace().next()?.split('T').nth(1)?.trim_end_matches('Z');
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// The value of `key=` in a text log line (quoted values unquoted).
pub fn log_field(line: &str, key: &str) -> Option<String> {
    let rest = line.split(&format!(" {key}=")).nth(1)?;
    if let Some(quoted) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = quoted.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                '"' => break,
                c => out.push(c),
            }
        }
        return Some(out);
    }
    Some(rest.split_whitespace().next().unwrap_or("").to_string())
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// See the module documentation.
pub struct Bed {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub state: PathBuf,
    pub addr: SocketAddr,
    pub driver: Driver,
    options: BedOptions,
    cluster: Option<Child>,
    /// Logs of every `placer cluster` process started, in order.
    cluster_logs: Vec<PathBuf>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut c) = self.cluster.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("e2e: the test failed; its files are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Pods as read from the API.
#[derive(Debug, Clone)]
pub struct Pods(pub Vec<Value>);

impl Pods {
    /// `name -> node` of bound pods.
    pub fn nodes(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter_map(|p| {
                let node = p["spec"]["nodeName"].as_str()?;
                Some((p["metadata"]["name"].as_str()?.to_string(), node.to_string()))
            })
            .collect()
    }

    pub fn bound(&self) -> usize {
        self.nodes().len()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

impl Bed {
    /// Starts `placer cluster` on a free loopback port and waits until it serves.
    pub fn start(options: BedOptions) -> Bed {
        let n = BEDS.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("placer-e2e-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a bed directory");
        let driver = driver();
        eprintln!("e2e: bed {} driven by {driver:?}", dir.display());
        let mut bed = Bed {
            kubeconfig: dir.join("kubeconfig"),
            state: dir.join("state.jsonl"),
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            driver,
            options,
            cluster: None,
            cluster_logs: Vec::new(),
            runtime: None,
        };
        bed.start_cluster();
        bed
    }

    fn start_cluster(&mut self) {
        let log = self.dir.join(format!("cluster-{}.log", self.cluster_logs.len()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_placer"));
        cmd.arg("cluster");
        if let Some(s) = &self.options.scenario {
            cmd.arg(s);
        }
        cmd.arg("--listen")
            .arg(self.addr.to_string())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--state")
            .arg(&self.state)
            .arg("--scheduler")
            .arg(if self.options.embedded_scheduler { "embedded" } else { "none" })
            .args(&self.options.cluster_args)
            .env("PLACER_LOG", "info,placer_apiserver::crud=debug,placer_apiserver::server=debug")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("a log file"));
        let mut child = cmd.spawn().expect("placer cluster starts");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => l,
            Err(_) => {
                panic!("placer cluster did not start: {}", std::fs::read_to_string(&log).unwrap_or_default())
            }
        };
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line of placer cluster: {line}"));
        self.addr = addr;
        self.cluster = Some(child);
        self.cluster_logs.push(log);
    }

    /// SIGKILLs the API server.
    pub fn kill_api(&mut self) {
        if let Some(mut c) = self.cluster.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the API server again from its state file, on the same port, with
    /// `extra_args` added to its flags.
    pub fn restart_api(&mut self, extra_args: &[&str]) {
        self.kill_api();
        self.options.cluster_args.extend(extra_args.iter().map(|s| s.to_string()));
        self.start_cluster();
    }

    /// The process id of the running `placer cluster`.
    pub fn cluster_pid(&self) -> Option<u32> {
        self.cluster.as_ref().map(Child::id)
    }

    /// Every `placer cluster` log so far.
    pub fn cluster_log(&self) -> String {
        self.cluster_logs.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect()
    }

    /// Starts a `placer serve` replica named `name` (its `POD_NAME`, so lease holders read
    /// `<name>_<suffix>`), with leader election on and `extra` appended to its config.
    pub fn serve(&self, name: &str, extra: &str) -> Replica {
        let text = format!(
            "schedulerName: placer\nleaderElection: {{enabled: true, namespace: kube-system, leaseDurationSeconds: 4, renewGraceSeconds: 2}}\nmetricsAddr: 127.0.0.1:0\n{extra}"
        );
        self.serve_with(Path::new(env!("CARGO_BIN_EXE_placer")), name, &text)
    }

    /// Starts `binary serve` named `name` with the whole configuration `config`.
    pub fn serve_with(&self, binary: &Path, name: &str, config_text: &str) -> Replica {
        let config = self.dir.join(format!("serve-{name}.yaml"));
        std::fs::write(&config, config_text).expect("a serve config");
        let log = self.dir.join(format!("serve-{name}.log"));
        let child = Command::new(binary)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("POD_NAME", name)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("placer serve starts");
        Replica { name: name.to_string(), child, log }
    }

    /// Runs kubectl (Kubectl driver only).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let Driver::Kubectl(bin) = &self.driver else { panic!("kubectl is not the driver") };
        Command::new(bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// Runs kubectl and insists on success; returns its output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn runtime(&mut self) -> &tokio::runtime::Runtime {
        self.runtime.get_or_insert_with(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime")
        })
    }

    async fn client(kubeconfig: &Path) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("a client config");
        kube::Client::try_from(config).expect("a client")
    }

    /// Creates every document of a YAML stream (`kubectl create -f FILE`).
    pub fn create_manifests(&mut self, name: &str, yaml: &str) -> String {
        let file = self.dir.join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).expect("a manifest file");
        match self.driver.clone() {
            Driver::Kubectl(_) => self.kubectl_ok(&["create", "-f", file.to_str().unwrap_or_default()]),
            Driver::KubeRs => {
                let kubeconfig = self.kubeconfig.clone();
                let docs: Vec<Value> = yaml
                    .split("\n---")
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| serde_saphyr::from_str::<Value>(d).expect("a YAML document"))
                    .collect();
                self.runtime().block_on(async move {
                    let client = Bed::client(&kubeconfig).await;
                    let mut out = String::new();
                    for doc in docs {
                        let obj: kube::core::DynamicObject = serde_json::from_value(doc).expect("an object");
                        let types = obj.types.clone().expect("apiVersion and kind");
                        let gvk =
                            kube::core::GroupVersionKind::try_from(&types).expect("a group/version/kind");
                        let (ar, _) =
                            kube::discovery::pinned_kind(&client, &gvk).await.expect("the kind is served");
                        let api: kube::Api<kube::core::DynamicObject> = match &obj.metadata.namespace {
                            Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &ar),
                            None => kube::Api::all_with(client.clone(), &ar),
                        };
                        let created =
                            api.create(&kube::api::PostParams::default(), &obj).await.expect("created");
                        out.push_str(&format!(
                            "{}/{} created\n",
                            ar.plural,
                            created.metadata.name.unwrap_or_default()
                        ));
                    }
                    out
                })
            }
        }
    }

    /// GET of an API path, as JSON.
    pub fn get_json(&mut self, path: &str) -> Value {
        match self.driver.clone() {
            Driver::Kubectl(_) => {
                let out = self.kubectl(&["get", "--raw", path]);
                if !out.status.success() {
                    return Value::Null;
                }
                serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
            }
            Driver::KubeRs => {
                let kubeconfig = self.kubeconfig.clone();
                let path = path.to_string();
                self.runtime().block_on(async move {
                    let client = Bed::client(&kubeconfig).await;
                    let req = http::Request::get(path).body(Vec::new()).expect("a request");
                    client.request::<Value>(req).await.unwrap_or(Value::Null)
                })
            }
        }
    }

    /// The pods of `namespace`.
    pub fn pods(&mut self, namespace: &str) -> Pods {
        let list = self.get_json(&format!("/api/v1/namespaces/{namespace}/pods"));
        Pods(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// Node name → labels.
    pub fn node_labels(&mut self) -> BTreeMap<String, BTreeMap<String, String>> {
        let list = self.get_json("/api/v1/nodes");
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let labels = n["metadata"]["labels"]
                    .as_object()
                    .map(|m| {
                        m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()
                    })
                    .unwrap_or_default();
                (n["metadata"]["name"].as_str().unwrap_or("").to_string(), labels)
            })
            .collect()
    }

    /// The holder of a Lease, if any.
    pub fn lease_holder(&mut self, namespace: &str, name: &str) -> Option<String> {
        let lease =
            self.get_json(&format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"));
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    }

    /// Polls `check` until it holds or `timeout` passes (then panics with `what`).
    pub fn wait_for(&mut self, timeout: Duration, what: &str, mut check: impl FnMut(&mut Bed) -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("e2e: timed out after {timeout:?} waiting for {what}");
    }

    /// Number of successful bindings the API server logged per pod (`namespace/name`).
    pub fn bindings(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for line in self.cluster_log().lines().filter(|l| l.contains("pod bound")) {
            if let Some(pod) = line.split("pod=").nth(1).and_then(|r| r.split_whitespace().next()) {
                *out.entry(pod.to_string()).or_insert(0) += 1;
            }
        }
        out
    }

    /// Every request the API server logged, in order.
    pub fn requests(&self) -> Vec<Logged> {
        self.cluster_log()
            .lines()
            .filter(|l| l.contains("placer_apiserver::server") && l.contains(" request "))
            .filter_map(|l| {
                Some(Logged {
                    at: log_time(l)?,
                    method: log_field(l, "method")?,
                    path: log_field(l, "path")?,
                    query: log_field(l, "query").unwrap_or_default(),
                    agent: log_field(l, "agent").unwrap_or_default(),
                })
            })
            .collect()
    }

    /// The times (seconds since midnight) at which the API server bound pods of
    /// `namespace`, in order.
    pub fn binding_times(&self, namespace: &str) -> Vec<f64> {
        let prefix = format!("{namespace}/");
        self.cluster_log()
            .lines()
            .filter(|l| l.contains("pod bound"))
            .filter(|l| log_field(l, "pod").is_some_and(|p| p.starts_with(&prefix)))
            .filter_map(log_time)
            .collect()
    }

    /// Writes `yaml` to a file in the bed and returns its path.
    pub fn file(&self, name: &str, yaml: &str) -> PathBuf {
        let p = self.dir.join(name);
        let mut f = std::fs::File::create(&p).expect("a file");
        f.write_all(yaml.as_bytes()).expect("written");
        p
    }
}

/// A namespace, a gang PodGroup with a rack constraint and `n` pods for `placer`.
pub fn rack_gang(namespace: &str, group: &str, n: usize, cpu: &str) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n---\n\
         apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {{name: {group}, namespace: {namespace}}}\n\
         spec:\n  schedulingPolicy:\n    gang:\n      minCount: {n}\n  schedulingConstraints:\n    topology:\n      - key: topology.example.com/rack\n"
    );
    for i in 0..n {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {group}-{i}, namespace: {namespace}}}\n\
             spec:\n  schedulerName: placer\n  schedulingGroup: {{podGroupName: {group}}}\n  terminationGracePeriodSeconds: 0\n\
             \x20 containers:\n    - name: main\n      image: registry.k8s.io/pause:3.10\n      resources: {{requests: {{cpu: \"{cpu}\", memory: 64Mi}}}}\n"
        ));
    }
    y
}

/// The distinct values of `label` on the nodes of bound `pods`.
pub fn domains(pods: &Pods, labels: &BTreeMap<String, BTreeMap<String, String>>, label: &str) -> Vec<String> {
    let mut d: Vec<String> = pods
        .nodes()
        .values()
        .map(|n| labels.get(n).and_then(|l| l.get(label)).cloned().unwrap_or_else(|| "<none>".into()))
        .collect();
    d.sort();
    d.dedup();
    d
}
