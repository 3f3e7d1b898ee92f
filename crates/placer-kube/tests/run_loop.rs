//! The scheduling loop over a `KubeStore` with a mocked API: it schedules only while
//! leading, stops writing the moment leadership is lost, starts a fresh term from the
//! cache when leadership returns, and stops on request.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use placer_api::k8s::api::core::v1::Pod;
use placer_cluster::{ClusterStore, Object};
use placer_controllers::{Controller, ControllerError};
use placer_kube::runloop::{self, ControllerFactory, LoopTiming, SchedulingLoop, Slot, View};
use placer_kube::{KubeStore, Leadership, Metrics, StoreOptions};
use tower_test::mock::Handle;

#[derive(Default)]
struct Counters {
    terms: u32,
    reconciles: u32,
    seen: Vec<String>,
}

/// Binds every pod it sees added, once.
struct Binder {
    seen_rv: u64,
    counters: Arc<Mutex<Counters>>,
}

impl Controller for Binder {
    fn name(&self) -> &'static str {
        "binder"
    }
    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        self.counters.lock().unwrap().reconciles += 1;
        for event in store.watch_since(self.seen_rv) {
            self.seen_rv = self.seen_rv.max(event.resource_version);
            let name = event.object.metadata().name.clone().unwrap_or_default();
            self.counters.lock().unwrap().seen.push(name.clone());
            let _ = store.bind("ns", &name, "uid", "node-a");
        }
        Ok(false)
    }
    fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }
}

fn pod(name: &str) -> Object {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.metadata.uid = Some("uid".into());
    p.metadata.resource_version = Some("1".into());
    Object::Pod(p.into())
}

async fn expect_binding(api: &mut Handle<Request<Body>, Response<Body>>, pod: &str) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(10), api.next_request())
        .await
        .expect("a binding request")
        .expect("the client is alive");
    assert_eq!(request.method(), Method::POST);
    assert!(request.uri().path().ends_with(&format!("/pods/{pod}/binding")), "{}", request.uri());
    send.send_response(Response::builder().status(201).body(Body::from(b"{}".to_vec())).unwrap());
}

async fn expect_silence(api: &mut Handle<Request<Body>, Response<Body>>) {
    let more = tokio::time::timeout(Duration::from_millis(300), api.next_request()).await;
    if let Ok(Some((request, _))) = more {
        panic!("expected no request, got {} {}", request.method(), request.uri());
    }
}

async fn wait_for(what: &str, counters: &Arc<Mutex<Counters>>, f: impl Fn(&Counters) -> bool) {
    for _ in 0..500 {
        if f(&counters.lock().unwrap()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_schedules_only_while_leading() {
    let (svc, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let mut store =
        KubeStore::new(client, tokio::runtime::Handle::current(), Metrics::new(), StoreOptions::default());
    let leadership = Leadership::standby();
    store.set_write_gate(leadership.clone());
    store.inject(pod("a"));
    let waker = store.waker();

    let counters = Arc::new(Mutex::new(Counters::default()));
    let factory_counters = counters.clone();
    let factory: ControllerFactory = Box::new(move || {
        factory_counters.lock().unwrap().terms += 1;
        vec![Slot {
            controller: Box::new(Binder { seen_rv: 0, counters: factory_counters.clone() }),
            view: View::Full,
        }]
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (thread_stop, thread_leadership) = (stop.clone(), leadership.clone());
    let timing = LoopTiming { idle_pass: Duration::from_millis(100), ..LoopTiming::default() };
    let thread = std::thread::spawn(move || {
        let scheduling = SchedulingLoop::new(factory, thread_leadership, Metrics::new());
        runloop::run(&mut store, scheduling, &thread_stop, timing);
    });

    // Standing by: no controller, no request.
    expect_silence(&mut api).await;
    assert_eq!(counters.lock().unwrap().terms, 0);

    // Leading: a term starts and binds the pod it finds in the cache.
    leadership.set_leader(true);
    waker.wake();
    expect_binding(&mut api, "a").await;
    wait_for("the first term", &counters, |c| c.terms == 1 && c.seen == ["a"]).await;

    // Lease lost: the term ends, nothing more is written.
    leadership.set_leader(false);
    waker.wake();
    let reconciles = counters.lock().unwrap().reconciles;
    expect_silence(&mut api).await;
    assert!(counters.lock().unwrap().reconciles <= reconciles + 1, "at most the pass under way finishes");

    // Lease regained: a fresh term reads the whole cache again (the log was compacted
    // while standing by) and acts on it.
    leadership.set_leader(true);
    waker.wake();
    expect_binding(&mut api, "a").await;
    wait_for("the second term", &counters, |c| c.terms == 2 && c.seen == ["a", "a"]).await;

    // Stop: the thread ends.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    waker.wake();
    tokio::task::spawn_blocking(move || thread.join()).await.unwrap().expect("the loop thread ends cleanly");
}
