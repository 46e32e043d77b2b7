//! Live metrics of a running job, cheap enough to leave on.
//!
//! Every thread of a job keeps plain counters of its own (tuples in and out per instance,
//! tuples each instance delivered to each downstream instance, tuples per inbound edge, time
//! blocked on full queues, and each instance's sampled CPU time when the job is profiled) and
//! a histogram of the latency markers that reached each instance since it last published. It
//! *publishes* them into relaxed atomics (one writer each) only when asked: a sampler bumps a
//! generation number a few times a second ([`SAMPLE_PERIOD`]) and each thread, at the end of
//! a round of its work loop, compares it with the last one it answered: one relaxed load a
//! round, no lock and no shared write per tuple. Publishing also reads what each receiver knows of its edge (its
//! queue's or ring's fill, bytes, tuples lost: [`sluice_transport::ReceiverStats`]) and the
//! percentiles of the markers' latency over the window, then starts a new window.
//!
//! A PE process sends its sample to the launcher with its heartbeat (`FromPe::Metrics`, every
//! 250 ms); a job whose PEs are threads of the launching process samples them on a thread of
//! its own. The launching process keeps each PE's last two samples ([`MetricsHandle`]) and
//! makes a [`MetricsSnapshot`] of them on demand. A sample is at most a period old, and a
//! thread blocked in one long call (or on a full queue) publishes once it comes back to its
//! loop; its blocked time is published while it waits.
//!
//! Rates are computed from the counters' own times: a thread stamps each publication with
//! its monotonic clock, and a rate is the difference of two publications over the difference
//! of their stamps. A sampler's reads and a thread's answers are not in step (a thread
//! answers at the end of its round, a PE's sample travels with its heartbeat): a read that
//! comes before the thread answered the last request sees the same publication again, and is
//! no new point. Rates taken between reads instead read 0 and then twice the true rate in
//! alternate periods for a steady source.
//! `RunOptions::metrics` turns all of it off (`sluice run --metrics off`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_graph::LatencyHistogram;
use sluice_transport::ReceiverStats;

use crate::report::per_destination;

/// How often a sample is taken: the threads publish, and a PE sends it with its heartbeat
/// (the control plane's heartbeat period is this one).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(250);

/// What a launching process can read of its running job: every PE's threads, their
/// instances and inbound edges, with rates over the last sampling period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    /// The job's name (the application's graph).
    pub job: String,
    /// Seconds since the job started.
    pub uptime_secs: f64,
    /// Every PE heard from so far, in plan order.
    pub pes: Vec<PeMetrics>,
}

/// One PE's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeMetrics {
    /// The PE's name in the plan.
    pub pe: String,
    /// Seconds since its last sample was taken.
    pub age_secs: f64,
    /// Its threads, in plan order.
    pub threads: Vec<ThreadMetrics>,
}

/// One thread's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadMetrics {
    /// The thread's name in the plan.
    pub thread: String,
    /// Seconds spent waiting on a full queue downstream (backpressure), in all.
    pub blocked_secs: f64,
    /// The share of the last period it spent so (0 to 1).
    pub blocked_share: f64,
    /// Its operator instances, in thread order.
    pub instances: Vec<InstanceMetrics>,
    /// The edges it receives from other threads or PEs.
    pub inputs: Vec<EdgeMetrics>,
}

/// One operator instance's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceMetrics {
    /// The logical operator's name.
    pub operator: String,
    /// The instance's name (`count[1]`, or the operator's when it has one instance).
    pub instance: String,
    /// Its id in the plan (`PhysicalPlan::instances` index).
    #[serde(default)]
    pub id: usize,
    /// Whether it is a source (it produces the job's tuples).
    pub source: bool,
    /// Whether it is a sink (it has no outputs).
    pub sink: bool,
    /// Tuples received so far.
    pub tuples_in: u64,
    /// Tuples emitted so far.
    pub tuples_out: u64,
    /// The figures the operator publishes itself ([`sluice_graph::live`]), by name.
    #[serde(default)]
    pub figures: Vec<(String, u64)>,
    /// Tuples received per second over the last period.
    pub rate_in: f64,
    /// Tuples emitted per second over the last period.
    pub rate_out: f64,
    /// Tuples delivered so far to each downstream instance: (its id in the plan, tuples), by
    /// id. Two snapshots' difference is each edge's traffic between them.
    #[serde(default)]
    pub sent: Vec<(usize, u64)>,
    /// Its CPU time so far, in nanoseconds, as the sampler estimates it; 0 unless the job is
    /// profiled (`RunOptions::profile_cpu`).
    #[serde(default)]
    pub cpu_ns: u64,
    /// How long the sampled latency markers took from their source to this instance, over
    /// the latest window that had some (none at a source, or before the first marker).
    pub latency: Option<LatencySummary>,
}

/// Percentiles of the latency markers' time from their source to an instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Markers in the window the percentiles are of.
    pub samples: u64,
    /// Median, in microseconds.
    pub p50_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
    /// Largest, in microseconds.
    pub max_us: f64,
}

/// One inbound edge's figures, as its receiver sees them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EdgeMetrics {
    /// The edge, as plans and errors name it (`split -> count[0]`, or a channel's label).
    pub edge: String,
    /// Its transport.
    pub transport: String,
    /// The operator it feeds.
    pub operator: String,
    /// Tuples received so far.
    pub tuples: u64,
    /// Tuples received per second over the last period.
    pub rate: f64,
    /// Bytes received so far, where the transport knows them.
    pub bytes: Option<u64>,
    /// What waits in its queue or ring, and what it holds at most (in messages, or in bytes
    /// when `queued_in_bytes`), where the transport knows them.
    pub queued: Option<u64>,
    /// The queue's or ring's size.
    pub capacity: Option<u64>,
    /// Whether `queued` and `capacity` count bytes (shm-osr) rather than messages.
    pub queued_in_bytes: bool,
    /// Tuples lost on the way (shm-osr's window, udp-mq's missing datagrams).
    pub lost: u64,
}

impl EdgeMetrics {
    /// The fill of its queue or ring, 0 to 1, where the transport knows it.
    pub fn fill(&self) -> Option<f64> {
        match (self.queued, self.capacity) {
            (Some(queued), Some(capacity)) if capacity > 0 => {
                Some((queued as f64 / capacity as f64).min(1.0))
            }
            _ => None,
        }
    }
}

/// One logical operator's figures: its instances' summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorMetrics {
    /// The operator's name.
    pub operator: String,
    /// Its instances seen.
    pub instances: usize,
    /// Whether it is a source.
    pub source: bool,
    /// Tuples received so far.
    pub tuples_in: u64,
    /// Tuples emitted so far.
    pub tuples_out: u64,
    /// Tuples received per second.
    pub rate_in: f64,
    /// Tuples emitted per second.
    pub rate_out: f64,
    /// The worst of its instances' latency percentiles.
    pub latency: Option<LatencySummary>,
}

impl MetricsSnapshot {
    /// Every instance of the job.
    pub fn instances(&self) -> impl Iterator<Item = &InstanceMetrics> {
        self.threads().flat_map(|t| t.instances.iter())
    }

    /// Every thread of the job.
    pub fn threads(&self) -> impl Iterator<Item = &ThreadMetrics> {
        self.pes.iter().flat_map(|p| p.threads.iter())
    }

    /// Every inbound edge of the job.
    pub fn edges(&self) -> impl Iterator<Item = &EdgeMetrics> {
        self.threads().flat_map(|t| t.inputs.iter())
    }

    /// The tuples delivered so far between every two instances: (upstream id, downstream
    /// id, tuples), ids in the plan.
    pub fn traffic(&self) -> impl Iterator<Item = (usize, usize, u64)> + '_ {
        self.instances()
            .flat_map(|i| i.sent.iter().map(move |&(to, tuples)| (i.id, to, tuples)))
    }

    /// The job's operators in the order their first instance appears, their instances'
    /// figures summed (latency: the worst instance's percentiles).
    pub fn operators(&self) -> Vec<OperatorMetrics> {
        let mut operators: Vec<OperatorMetrics> = Vec::new();
        for i in self.instances() {
            let at = match operators.iter().position(|o| o.operator == i.operator) {
                Some(at) => at,
                None => {
                    operators.push(OperatorMetrics {
                        operator: i.operator.clone(),
                        source: i.source,
                        ..OperatorMetrics::default()
                    });
                    operators.len() - 1
                }
            };
            let o = &mut operators[at];
            o.instances += 1;
            o.tuples_in += i.tuples_in;
            o.tuples_out += i.tuples_out;
            o.rate_in += i.rate_in;
            o.rate_out += i.rate_out;
            o.latency = match (o.latency, i.latency) {
                (Some(a), Some(b)) => Some(LatencySummary {
                    samples: a.samples + b.samples,
                    p50_us: a.p50_us.max(b.p50_us),
                    p99_us: a.p99_us.max(b.p99_us),
                    max_us: a.max_us.max(b.max_us),
                }),
                (a, b) => a.or(b),
            };
        }
        operators
    }

    /// Tuples per second the job's sources emit, over the last period.
    pub fn source_rate(&self) -> f64 {
        self.instances()
            .filter(|i| i.source)
            .map(|i| i.rate_out)
            .sum()
    }

    /// Tuples the job's sources emitted so far.
    pub fn source_tuples(&self) -> u64 {
        self.instances()
            .filter(|i| i.source)
            .map(|i| i.tuples_out)
            .sum()
    }
}

// ---------------------------------------------------------------------------------------
// What the threads publish.

/// A counter with one writer: its thread stores, a sampler loads.
#[derive(Debug, Default)]
struct Cell(AtomicU64);

impl Cell {
    #[inline]
    fn set(&self, value: u64) {
        // SYNC: Relaxed: a figure for reporting; nothing is published through it.
        self.0.store(value, Ordering::Relaxed)
    }

    fn get(&self) -> u64 {
        // SYNC: pairs with the Relaxed store in `set`; see there.
        self.0.load(Ordering::Relaxed)
    }
}

/// What a thread publishes of one instance.
#[derive(Debug, Default)]
struct InstanceCells {
    tuples_in: Cell,
    tuples_out: Cell,
    cpu_ns: Cell,
    /// Tuples delivered on each of its edges, in the order of `InstanceLabels::to`.
    sent: Vec<Cell>,
    latency_samples: Cell,
    p50_ns: Cell,
    p99_ns: Cell,
    max_ns: Cell,
}

impl InstanceCells {
    fn new(labels: &InstanceLabels) -> Self {
        Self {
            sent: labels.to.iter().map(|_| Cell::default()).collect(),
            ..Self::default()
        }
    }
}

/// `queued`, `capacity` and `bytes` unknown.
const UNKNOWN: u64 = u64::MAX;

/// What a thread publishes of one inbound edge.
#[derive(Debug)]
struct EdgeCells {
    tuples: Cell,
    bytes: Cell,
    queued: Cell,
    capacity: Cell,
    /// 1 when `queued` and `capacity` count bytes.
    in_bytes: Cell,
    lost: Cell,
}

impl Default for EdgeCells {
    fn default() -> Self {
        let unknown = || Cell(AtomicU64::new(UNKNOWN));
        Self {
            tuples: Cell::default(),
            bytes: unknown(),
            queued: unknown(),
            capacity: unknown(),
            in_bytes: Cell::default(),
            lost: Cell::default(),
        }
    }
}

/// The names of what one thread publishes of one instance.
#[derive(Debug, Clone)]
pub(crate) struct InstanceLabels {
    pub(crate) operator: String,
    pub(crate) instance: String,
    /// Its id in the plan.
    pub(crate) id: usize,
    pub(crate) source: bool,
    pub(crate) sink: bool,
    /// The downstream instance of each of its edges, in the order of `Node::deliveries`.
    pub(crate) to: Vec<usize>,
}

/// The names of what one thread publishes.
#[derive(Debug, Clone)]
pub(crate) struct ThreadLabels {
    pub(crate) pe: String,
    pub(crate) thread: String,
    pub(crate) instances: Vec<InstanceLabels>,
    /// Per inbound edge: edge, transport, the operator it feeds.
    pub(crate) inputs: Vec<(String, String, String)>,
}

/// What one thread publishes, and the generation it last answered.
#[derive(Debug)]
pub(crate) struct ThreadCells {
    labels: ThreadLabels,
    blocked_ns: Cell,
    /// `monotonic_ns` when `blocked_ns` was last set.
    blocked_at_ns: Cell,
    /// `monotonic_ns` of the last publication of the counts (0: none yet).
    // SYNC: stored Release after the counts of its publication, loaded Acquire before they
    // are read (`ThreadSample::read`): the counts read are at least those of the stamp.
    published_ns: AtomicU64,
    instances: Vec<InstanceCells>,
    inputs: Vec<EdgeCells>,
}

/// The writing side of one thread's metrics, owned by that thread.
pub(crate) struct ThreadPublisher {
    cells: Arc<ThreadCells>,
    request: Arc<CachePaddedGeneration>,
    answered: std::cell::Cell<u64>,
    /// Nanoseconds blocked on full queues, in all, by the waits that ended.
    blocked_ns: std::cell::Cell<u64>,
}

/// The sampler's generation number, on a cache line of its own (every thread reads it every
/// round; it changes a few times a second).
#[derive(Debug, Default)]
pub(crate) struct CachePaddedGeneration(sluice_sync::CachePadded<AtomicU64>);

impl ThreadPublisher {
    /// Whether the sampler asked for a publication since the last: a relaxed load.
    #[inline]
    pub(crate) fn asked(&self) -> bool {
        // SYNC: Relaxed: the number only says when to publish; the figures are separate.
        self.request.0.load(Ordering::Relaxed) != self.answered.get()
    }

    /// Notes that the thread published, answering the current request.
    fn answered(&self) {
        // SYNC: as in `asked`.
        self.answered.set(self.request.0.load(Ordering::Relaxed));
    }

    /// Publishes instance `index`'s counts and, if its window has any, its markers' latency
    /// percentiles (the window is then cleared).
    pub(crate) fn instance(
        &self,
        index: usize,
        tuples_in: u64,
        tuples_out: u64,
        window: Option<&mut LatencyHistogram>,
    ) {
        let Some(cells) = self.cells.instances.get(index) else {
            return;
        };
        cells.tuples_in.set(tuples_in);
        cells.tuples_out.set(tuples_out);
        if let Some(window) = window.filter(|w| !w.is_empty()) {
            cells.p50_ns.set(window.value_at_quantile(0.5));
            cells.p99_ns.set(window.value_at_quantile(0.99));
            cells.max_ns.set(window.max());
            cells
                .latency_samples
                .set(cells.latency_samples.get() + window.len());
            window.reset();
        }
    }

    /// Publishes instance `index`'s CPU time so far and the tuples it delivered on each of its
    /// edges (`deliveries`, in the order its labels name their destinations).
    pub(crate) fn traffic(
        &self,
        index: usize,
        cpu_ns: u64,
        deliveries: impl Iterator<Item = (usize, u64)>,
    ) {
        let Some(cells) = self.cells.instances.get(index) else {
            return;
        };
        cells.cpu_ns.set(cpu_ns);
        for (cell, (_, tuples)) in cells.sent.iter().zip(deliveries) {
            cell.set(tuples);
        }
    }

    /// Publishes inbound edge `index`'s tuples and what its receiver knows.
    pub(crate) fn input(&self, index: usize, tuples: u64, stats: ReceiverStats) {
        let Some(cells) = self.cells.inputs.get(index) else {
            return;
        };
        cells.tuples.set(tuples);
        cells.bytes.set(stats.bytes.unwrap_or(UNKNOWN));
        let (queued, capacity) = stats.queued.unwrap_or((UNKNOWN, UNKNOWN));
        cells.queued.set(queued);
        cells.capacity.set(capacity);
        cells.in_bytes.set(u64::from(stats.queued_in_bytes));
        cells.lost.set(stats.lost);
    }

    /// Ends a publication made at `now_ns` (`monotonic_ns`): its stamp, the blocked time so
    /// far, and the request answered.
    pub(crate) fn done(&self, now_ns: u64) {
        self.cells.blocked_ns.set(self.blocked_ns.get());
        self.cells.blocked_at_ns.set(now_ns);
        // SYNC: Release, after the counts it stamps; pairs with the Acquire load in
        // `ThreadSample::read`.
        self.cells.published_ns.store(now_ns, Ordering::Release);
        self.answered();
    }

    /// A wait on a full queue that began at `began_ns` (`monotonic_ns`) is still going on at
    /// `now_ns`: its time so far is published, so a long block shows while it lasts.
    pub(crate) fn blocking(&self, began_ns: u64, now_ns: u64) {
        self.cells
            .blocked_ns
            .set(self.blocked_ns.get() + now_ns.saturating_sub(began_ns));
        self.cells.blocked_at_ns.set(now_ns);
    }

    /// A wait on a full queue that began at `began_ns` ended at `now_ns`.
    pub(crate) fn blocked(&self, began_ns: u64, now_ns: u64) {
        self.blocked_ns
            .set(self.blocked_ns.get() + now_ns.saturating_sub(began_ns));
    }
}

/// Every thread of this process that publishes, and the sampler's generation number.
#[derive(Debug, Default)]
pub struct ProcessMetrics {
    request: Arc<CachePaddedGeneration>,
    threads: Mutex<Vec<Arc<ThreadCells>>>,
}

impl ProcessMetrics {
    /// Registers a thread with these labels; returns its publisher.
    pub(crate) fn register(&self, labels: ThreadLabels) -> ThreadPublisher {
        let cells = Arc::new(ThreadCells {
            blocked_ns: Cell::default(),
            blocked_at_ns: Cell::default(),
            published_ns: AtomicU64::new(0),
            instances: labels.instances.iter().map(InstanceCells::new).collect(),
            inputs: labels.inputs.iter().map(|_| EdgeCells::default()).collect(),
            labels,
        });
        lock(&self.threads).push(cells.clone());
        ThreadPublisher {
            cells,
            request: self.request.clone(),
            answered: std::cell::Cell::new(0),
            blocked_ns: std::cell::Cell::new(0),
        }
    }

    /// What the threads last published, per PE, and a request for the next publication.
    pub fn sample(&self) -> Vec<(String, Vec<ThreadSample>)> {
        let threads = lock(&self.threads).clone();
        // SYNC: Relaxed: see `ThreadPublisher::asked`.
        self.request.0.fetch_add(1, Ordering::Relaxed);
        let mut pes: Vec<(String, Vec<ThreadSample>)> = Vec::new();
        for cells in threads {
            let sample = ThreadSample::read(&cells);
            match pes.iter_mut().find(|(pe, _)| *pe == cells.labels.pe) {
                Some((_, samples)) => samples.push(sample),
                None => pes.push((cells.labels.pe.clone(), vec![sample])),
            }
        }
        pes
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// Samples: cumulative figures, as a PE sends them to its launcher.

/// One thread's published figures, cumulative.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSample {
    thread: String,
    /// `monotonic_ns` of the publication of its counts, in its PE's clock (0: none yet).
    #[serde(default)]
    published_ns: u64,
    blocked_ns: u64,
    /// `monotonic_ns` when `blocked_ns` was taken.
    #[serde(default)]
    blocked_at_ns: u64,
    instances: Vec<InstanceSample>,
    inputs: Vec<EdgeSample>,
}

/// New fields default, so a launcher reads what a PE of an older build sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct InstanceSample {
    operator: String,
    instance: String,
    #[serde(default)]
    id: usize,
    source: bool,
    sink: bool,
    tuples_in: u64,
    tuples_out: u64,
    #[serde(default)]
    cpu_ns: u64,
    #[serde(default)]
    sent: Vec<(usize, u64)>,
    latency: Option<LatencySummary>,
    #[serde(default)]
    figures: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct EdgeSample {
    edge: String,
    transport: String,
    operator: String,
    tuples: u64,
    bytes: Option<u64>,
    queued: Option<u64>,
    capacity: Option<u64>,
    queued_in_bytes: bool,
    lost: u64,
}

fn known(value: u64) -> Option<u64> {
    (value != UNKNOWN).then_some(value)
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl ThreadSample {
    fn read(cells: &ThreadCells) -> Self {
        let labels = &cells.labels;
        // SYNC: Acquire, before the counts; pairs with the Release store in
        // `ThreadPublisher::done`.
        let published_ns = cells.published_ns.load(Ordering::Acquire);
        Self {
            thread: labels.thread.clone(),
            published_ns,
            blocked_ns: cells.blocked_ns.get(),
            blocked_at_ns: cells.blocked_at_ns.get(),
            instances: labels
                .instances
                .iter()
                .zip(&cells.instances)
                .map(|(l, c)| {
                    let samples = c.latency_samples.get();
                    let sent = l.to.iter().copied().zip(c.sent.iter().map(Cell::get));
                    InstanceSample {
                        operator: l.operator.clone(),
                        instance: l.instance.clone(),
                        id: l.id,
                        source: l.source,
                        sink: l.sink,
                        tuples_in: c.tuples_in.get(),
                        tuples_out: c.tuples_out.get(),
                        cpu_ns: c.cpu_ns.get(),
                        sent: per_destination(sent),
                        figures: sluice_graph::live::read_live_figures(&l.instance),
                        latency: (samples > 0).then(|| LatencySummary {
                            samples,
                            p50_us: micros(c.p50_ns.get()),
                            p99_us: micros(c.p99_ns.get()),
                            max_us: micros(c.max_ns.get()),
                        }),
                    }
                })
                .collect(),
            inputs: labels
                .inputs
                .iter()
                .zip(&cells.inputs)
                .map(|((edge, transport, operator), c)| EdgeSample {
                    edge: edge.clone(),
                    transport: transport.clone(),
                    operator: operator.clone(),
                    tuples: c.tuples.get(),
                    bytes: known(c.bytes.get()),
                    queued: known(c.queued.get()),
                    capacity: known(c.capacity.get()),
                    queued_in_bytes: c.in_bytes.get() == 1,
                    lost: c.lost.get(),
                })
                .collect(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The launching process's view.

/// A PE's latest sample, with when it came, and per thread its publication before the one
/// in the latest sample: the two points of its rates.
#[derive(Debug, Default)]
struct PeSamples {
    latest: Option<(Instant, Vec<ThreadSample>)>,
    earlier: BTreeMap<String, ThreadSample>,
}

/// The job's latest figures, as the launching process holds them.
#[derive(Debug)]
struct JobMetrics {
    job: String,
    started: Instant,
    /// Every PE of the plan, in order, with its samples.
    pes: Mutex<Vec<(String, PeSamples)>>,
    /// Set when the job's wait ends: a sampler thread leaves.
    ended: AtomicBool,
    /// The job is being redeployed: it has not ended for those who watch it.
    handing_over: AtomicBool,
    /// The run that took the job's place ([`MetricsHandle::follow`]).
    successor: Mutex<Option<MetricsHandle>>,
}

/// A handle on a running job's metrics, for any thread of the launching process (a web
/// page, a Prometheus scrape, a terminal monitor): [`MetricsHandle::snapshot`] makes a
/// [`MetricsSnapshot`] of the latest samples. It stays valid after the job ends (its last
/// figures stay). When the job is redeployed, the handle follows the run that takes its place
/// ([`MetricsHandle::hand_over`], [`MetricsHandle::follow`]), so whoever watches it goes on.
#[derive(Debug, Clone)]
pub struct MetricsHandle(Arc<JobMetrics>);

impl MetricsHandle {
    /// A handle for job `job` whose PEs are named `pes`, in plan order.
    pub fn new(job: &str, pes: impl IntoIterator<Item = String>) -> Self {
        Self(Arc::new(JobMetrics {
            job: job.to_string(),
            started: Instant::now(),
            pes: Mutex::new(pes.into_iter().map(|p| (p, PeSamples::default())).collect()),
            ended: AtomicBool::new(false),
            handing_over: AtomicBool::new(false),
            successor: Mutex::new(None),
        }))
    }

    /// The job is about to be redeployed: until [`MetricsHandle::follow`] names the run that
    /// takes its place, the handle does not say it ended.
    pub fn hand_over(&self) {
        // SYNC: Relaxed: watchers only poll it.
        self.0.handing_over.store(true, Ordering::Relaxed);
    }

    /// From now on the handle gives the figures of `next`, the run that took the job's place
    /// (and of whatever takes `next`'s).
    pub fn follow(&self, next: &MetricsHandle) {
        *lock(&self.0.successor) = Some(next.clone());
        self.0.handing_over.store(false, Ordering::Relaxed);
    }

    /// The run whose figures the handle gives: the last of its successors.
    fn current(&self) -> MetricsHandle {
        match lock(&self.0.successor).clone() {
            Some(next) => next.current(),
            None => self.clone(),
        }
    }

    /// Takes in a PE's sample, taken now.
    pub fn record(&self, pe: &str, threads: Vec<ThreadSample>) {
        let mut pes = lock(&self.0.pes);
        if let Some((_, samples)) = pes.iter_mut().find(|(name, _)| name == pe) {
            // A thread's sample that repeats the publication of the latest is no new point:
            // its earlier publication stays the one before. (Stamp 0: not published yet.)
            for before in samples.latest.take().into_iter().flat_map(|(_, l)| l) {
                let again = threads
                    .iter()
                    .any(|t| t.thread == before.thread && t.published_ns == before.published_ns);
                if !again && before.published_ns != 0 {
                    samples.earlier.insert(before.thread.clone(), before);
                }
            }
            samples.latest = Some((Instant::now(), threads));
        }
    }

    /// Samples `process` every [`SAMPLE_PERIOD`] on a thread of its own until the job ends
    /// (a job whose PEs are threads of this process).
    pub fn sample_threads(&self, process: Arc<ProcessMetrics>) {
        let handle = self.clone();
        let spawned = std::thread::Builder::new()
            .name("sluice-metrics".into())
            .spawn(move || loop {
                // Its own run's end, not a successor's.
                let ended = handle.0.ended.load(Ordering::Relaxed);
                for (pe, threads) in process.sample() {
                    handle.record(&pe, threads);
                }
                if ended {
                    break;
                }
                std::thread::sleep(SAMPLE_PERIOD);
            });
        // Without the thread, the job runs without live figures.
        drop(spawned);
    }

    /// The job ended: a sampler thread leaves.
    pub fn end(&self) {
        // SYNC: Relaxed: the sampler only needs to see it eventually.
        self.0.ended.store(true, Ordering::Relaxed);
    }

    /// Whether the job has ended (the run that took its place, if it was redeployed).
    pub fn ended(&self) -> bool {
        let current = self.current();
        current.0.ended.load(Ordering::Relaxed) && !current.0.handing_over.load(Ordering::Relaxed)
    }

    /// The job's figures now (the run's that took its place, if it was redeployed): each PE's
    /// latest sample, rates from its previous one.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let current = self.current();
        if !Arc::ptr_eq(&current.0, &self.0) {
            return current.snapshot();
        }
        let now = Instant::now();
        let pes = lock(&self.0.pes);
        MetricsSnapshot {
            job: self.0.job.clone(),
            uptime_secs: now.duration_since(self.0.started).as_secs_f64(),
            pes: pes
                .iter()
                .filter_map(|(pe, samples)| {
                    let (at, latest) = samples.latest.as_ref()?;
                    Some(PeMetrics {
                        pe: pe.clone(),
                        age_secs: now.duration_since(*at).as_secs_f64(),
                        threads: threads_metrics(latest, &samples.earlier),
                    })
                })
                .collect(),
        }
    }
}

/// Rates between two counts `seconds` apart (0 when there is no earlier count).
fn rate(now: u64, before: Option<u64>, seconds: f64) -> f64 {
    match before {
        Some(before) if seconds > 0.0 => now.saturating_sub(before) as f64 / seconds,
        _ => 0.0,
    }
}

/// Seconds from `before_ns` to `now_ns` (0 when not later).
fn seconds_between(before_ns: u64, now_ns: u64) -> f64 {
    now_ns.saturating_sub(before_ns) as f64 / 1e9
}

/// Each thread's figures: its latest sample, with rates from its publication before
/// (`earlier`), over the time between their stamps.
fn threads_metrics(
    latest: &[ThreadSample],
    earlier: &BTreeMap<String, ThreadSample>,
) -> Vec<ThreadMetrics> {
    latest
        .iter()
        .map(|t| {
            let before = earlier.get(&t.thread);
            let seconds = before.map_or(0.0, |b| seconds_between(b.published_ns, t.published_ns));
            let blocked_seconds =
                before.map_or(0.0, |b| seconds_between(b.blocked_at_ns, t.blocked_at_ns));
            let blocked = rate(t.blocked_ns, before.map(|b| b.blocked_ns), blocked_seconds) / 1e9;
            ThreadMetrics {
                thread: t.thread.clone(),
                blocked_secs: t.blocked_ns as f64 / 1e9,
                blocked_share: blocked.min(1.0),
                instances: t
                    .instances
                    .iter()
                    .map(|i| {
                        let was = before
                            .and_then(|b| b.instances.iter().find(|x| x.instance == i.instance));
                        InstanceMetrics {
                            operator: i.operator.clone(),
                            instance: i.instance.clone(),
                            id: i.id,
                            source: i.source,
                            sink: i.sink,
                            tuples_in: i.tuples_in,
                            tuples_out: i.tuples_out,
                            figures: i.figures.clone(),
                            rate_in: rate(i.tuples_in, was.map(|w| w.tuples_in), seconds),
                            rate_out: rate(i.tuples_out, was.map(|w| w.tuples_out), seconds),
                            sent: i.sent.clone(),
                            cpu_ns: i.cpu_ns,
                            latency: i.latency,
                        }
                    })
                    .collect(),
                inputs: t
                    .inputs
                    .iter()
                    .map(|e| {
                        let was = before.and_then(|b| b.inputs.iter().find(|x| x.edge == e.edge));
                        EdgeMetrics {
                            edge: e.edge.clone(),
                            transport: e.transport.clone(),
                            operator: e.operator.clone(),
                            tuples: e.tuples,
                            rate: rate(e.tuples, was.map(|w| w.tuples), seconds),
                            bytes: e.bytes,
                            queued: e.queued,
                            capacity: e.capacity,
                            queued_in_bytes: e.queued_in_bytes,
                            lost: e.lost,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> ThreadLabels {
        ThreadLabels {
            pe: "pe0".into(),
            thread: "t0".into(),
            instances: vec![
                InstanceLabels {
                    operator: "src".into(),
                    instance: "src".into(),
                    id: 0,
                    source: true,
                    sink: false,
                    to: vec![1, 1],
                },
                InstanceLabels {
                    operator: "sink".into(),
                    instance: "sink".into(),
                    id: 1,
                    source: false,
                    sink: true,
                    to: Vec::new(),
                },
            ],
            inputs: vec![("src -> sink".into(), "threaded".into(), "sink".into())],
        }
    }

    const SECOND: u64 = 1_000_000_000;

    /// Samples `process` into `handle`, as the sampler thread does every period.
    fn sample(process: &ProcessMetrics, handle: &MetricsHandle) {
        for (pe, threads) in process.sample() {
            handle.record(&pe, threads);
        }
    }

    #[test]
    fn a_steady_source_has_a_steady_rate_whenever_its_thread_answers() {
        let process = Arc::new(ProcessMetrics::default());
        let publisher = process.register(labels());
        let handle = MetricsHandle::new("job", ["pe0".to_string()]);
        // 1,000 tuples a second, published at whole seconds; the thread answers the sampler's
        // request sometimes before its next read (a new point), sometimes after it (the read
        // sees the same publication again), as a thread whose round or a PE whose heartbeat
        // is not in step with the sampler does.
        let mut rates = Vec::new();
        let late = [false, false, true, false, true, true, false, false];
        for (second, late) in (1..=8).zip(late) {
            if late {
                // A read before the thread answered: the same publication again.
                sample(&process, &handle);
                rates.push(handle.snapshot().source_rate());
            }
            publisher.instance(0, 0, 1000 * second, None);
            publisher.done(second * SECOND);
            sample(&process, &handle);
            rates.push(handle.snapshot().source_rate());
        }
        assert_eq!(rates[0], 0.0, "one publication has no rate");
        assert!(rates[1..].iter().all(|&r| r == 1000.0), "{rates:?}");
    }

    #[test]
    fn a_thread_publishes_only_when_asked_and_rates_come_from_two_samples() {
        let process = Arc::new(ProcessMetrics::default());
        let publisher = process.register(labels());
        assert!(!publisher.asked());
        let handle = MetricsHandle::new("job", ["pe0".to_string()]);
        assert!(handle.snapshot().pes.is_empty(), "no sample yet");

        sample(&process, &handle);
        assert!(publisher.asked());
        let mut window = sluice_graph::latency_histogram();
        window.saturating_record(2_000);
        window.saturating_record(4_000);
        publisher.instance(0, 0, 1000, None);
        publisher.traffic(0, 5_000, [(1, 600), (1, 400)].into_iter());
        publisher.instance(1, 1000, 0, Some(&mut window));
        publisher.input(
            0,
            1000,
            ReceiverStats {
                queued: Some((3, 4)),
                ..ReceiverStats::default()
            },
        );
        publisher.blocked(0, 1_000);
        publisher.done(SECOND);
        assert!(!publisher.asked());
        assert!(window.is_empty(), "a published window starts again");
        sample(&process, &handle);
        assert_eq!(
            handle.snapshot().source_rate(),
            0.0,
            "one publication: no rate"
        );

        publisher.instance(0, 0, 1000, None);
        publisher.done(2 * SECOND);
        sample(&process, &handle);
        let snapshot = handle.snapshot();
        assert_eq!(snapshot.job, "job");
        let thread = &snapshot.pes[0].threads[0];
        assert_eq!(thread.instances[1].tuples_in, 1000);
        assert_eq!(
            thread.instances[0].rate_out, 0.0,
            "the same count a second later"
        );
        assert_eq!(snapshot.source_tuples(), 1000);
        assert_eq!(thread.instances[0].cpu_ns, 5_000);
        assert_eq!(snapshot.traffic().collect::<Vec<_>>(), [(0, 1, 1000)]);
        let latency = thread.instances[1].latency.unwrap();
        assert_eq!(latency.samples, 2);
        assert!(
            latency.p50_us >= 1.9 && latency.max_us >= 3.9,
            "{latency:?}"
        );
        assert_eq!(thread.inputs[0].fill(), Some(0.75));
        assert_eq!(thread.blocked_secs, 1e-6);
        let operators = snapshot.operators();
        assert_eq!(operators.len(), 2);
        assert!(operators[0].source);

        let json = serde_json::to_string(&snapshot).unwrap();
        let back: MetricsSnapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(back, snapshot);
    }
}
