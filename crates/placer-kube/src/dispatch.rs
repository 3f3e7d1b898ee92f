//! [`KubeDispatcher`]: the scheduler driver's [`Dispatcher`] over the Kubernetes API.
//!
//! * Bindings run as tasks on the runtime, at most `concurrency` at once; the others wait
//!   in a queue in decision order. A binding that meets a transient error (429, 5xx, no
//!   answer) is retried with jittered exponential backoff before it is reported failed.
//!   [`Dispatcher::cancel_group`] takes a gang's queued bindings out of the queue and
//!   reports them cancelled at once.
//! * Status writes run as tasks too, in order per object (the next write to an object
//!   starts when the previous one is done).
//! * Every finished binding wakes the scheduling loop, which picks the outcome up on its
//!   next pass.
//!
//! The client's rate limiter (`clientConnection`) paces all of it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use placer_cluster::{ObjectRef, StoreError};
use placer_controllers::scheduler::{BindCall, BindOutcome, BindResult, Dispatcher, StatusCall};
use placer_engine::GroupKey;
use tokio::runtime::Handle;

use crate::retry::RetryPolicy;
use crate::writer::Writer;

/// Attempts of one binding (the first and its retries after transient errors).
pub const BIND_ATTEMPTS: u32 = 5;

#[derive(Default)]
struct State {
    queued: VecDeque<BindCall>,
    running: usize,
    done: Vec<BindOutcome>,
    /// Per object: status writes waiting behind the one in flight (present while one is).
    status_chains: HashMap<ObjectRef, VecDeque<StatusCall>>,
}

struct Inner {
    writer: Writer,
    handle: Handle,
    concurrency: usize,
    retry: RetryPolicy,
    state: Mutex<State>,
    /// Bindings queued or running in this dispatcher and every [`KubeDispatcher::fresh`]
    /// one (shutdown waits for them).
    outstanding: Arc<AtomicUsize>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// See the module documentation.
#[derive(Clone)]
pub struct KubeDispatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for KubeDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.lock();
        f.debug_struct("KubeDispatcher")
            .field("queued", &s.queued.len())
            .field("running", &s.running)
            .field("done", &s.done.len())
            .finish()
    }
}

impl KubeDispatcher {
    pub(crate) fn new(writer: Writer, handle: Handle, concurrency: usize) -> KubeDispatcher {
        let retry = RetryPolicy { attempts: BIND_ATTEMPTS, ..writer.retry };
        KubeDispatcher {
            inner: Arc::new(Inner {
                writer,
                handle,
                concurrency: concurrency.max(1),
                retry,
                state: Mutex::new(State::default()),
                outstanding: Arc::default(),
            }),
        }
    }

    /// A dispatcher with its own queue and outcomes (one per leadership term) over the
    /// same writer, sharing the count of outstanding bindings.
    pub fn fresh(&self) -> KubeDispatcher {
        let i = &self.inner;
        KubeDispatcher {
            inner: Arc::new(Inner {
                writer: i.writer.clone(),
                handle: i.handle.clone(),
                concurrency: i.concurrency,
                retry: i.retry,
                state: Mutex::new(State::default()),
                outstanding: i.outstanding.clone(),
            }),
        }
    }

    /// Bindings queued or running, in this dispatcher and every fresh one.
    pub fn outstanding(&self) -> usize {
        self.inner.outstanding.load(Ordering::SeqCst)
    }

    /// Starts queued bindings while fewer than `concurrency` run.
    fn pump(inner: &Arc<Inner>) {
        loop {
            let call = {
                let mut s = inner.lock();
                if s.running >= inner.concurrency {
                    return;
                }
                let Some(call) = s.queued.pop_front() else { return };
                s.running += 1;
                call
            };
            let task = inner.clone();
            inner.handle.spawn(async move {
                let w = &task.writer;
                let result = match w
                    .bind(&call.pod.namespace, &call.pod.name, &call.uid, &call.node, task.retry)
                    .await
                {
                    Ok(()) => BindResult::Bound,
                    Err(e) => BindResult::Failed(e),
                };
                {
                    let mut s = task.lock();
                    s.running -= 1;
                    s.done.push(BindOutcome { call, result });
                }
                task.outstanding.fetch_sub(1, Ordering::SeqCst);
                KubeDispatcher::pump(&task);
                task.writer.shared.wake();
            });
        }
    }

    fn start_status(inner: &Arc<Inner>, r: ObjectRef, call: StatusCall) {
        let task = inner.clone();
        inner.handle.spawn(async move {
            let mut next = Some(call);
            while let Some(call) = next {
                match task.writer.update_status(call.object, call.base).await {
                    Ok(_) | Err(StoreError::NotFound(_)) => {}
                    Err(e) => tracing::warn!(object = %r, error = %e, "status update failed"),
                }
                let mut s = task.lock();
                next = s.status_chains.get_mut(&r).and_then(VecDeque::pop_front);
                if next.is_none() {
                    s.status_chains.remove(&r);
                }
            }
        });
    }
}

impl Dispatcher for KubeDispatcher {
    fn bind(&mut self, call: BindCall) {
        self.inner.outstanding.fetch_add(1, Ordering::SeqCst);
        self.inner.lock().queued.push_back(call);
        KubeDispatcher::pump(&self.inner);
    }

    fn update_status(&mut self, call: StatusCall) {
        let r = call.object.object_ref();
        {
            let mut s = self.inner.lock();
            if let Some(chain) = s.status_chains.get_mut(&r) {
                chain.push_back(call);
                return;
            }
            s.status_chains.insert(r.clone(), VecDeque::new());
        }
        KubeDispatcher::start_status(&self.inner, r, call);
    }

    fn cancel_group(&mut self, group: &GroupKey) {
        let mut s = self.inner.lock();
        let (cancelled, kept): (Vec<BindCall>, Vec<BindCall>) =
            std::mem::take(&mut s.queued).into_iter().partition(|c| c.group.as_ref() == Some(group));
        s.queued = kept.into();
        self.inner.outstanding.fetch_sub(cancelled.len(), Ordering::SeqCst);
        s.done.extend(cancelled.into_iter().map(|call| BindOutcome { call, result: BindResult::Cancelled }));
    }

    fn completed(&mut self) -> Vec<BindOutcome> {
        std::mem::take(&mut self.inner.lock().done)
    }

    fn in_flight(&self) -> usize {
        let s = self.inner.lock();
        s.queued.len() + s.running + s.done.len()
    }
}
