//! Checkpoints in the control plane: the writer that stores each instance's part off the data
//! path ([`PartWriter`]), the coordinator that asks for checkpoints and completes them
//! ([`Coordinator`]), and the checkpoint a job starts from ([`StoredCheckpoint`]).
//!
//! ```text
//!  coordinator (this process, or the launcher)      every process running instances
//!  every `every`: ask for n          ── Checkpoint{n} ──▶  JobControl::trigger_checkpoint
//!                                                        sources: position, barrier ...
//!                                                        each instance: its part, handed to
//!                                                        the PartWriter's thread, which
//!                                                        writes it to the store
//!  counts the parts                 ◀── PartAck{n, ..} ──
//!  all in: manifest written last,
//!  then                             ── Complete{n} ──▶  instances told (a two-phase sink
//!                                                        publishes what n covers)
//! ```
//! One checkpoint is in flight at a time; the next is asked for `every` after the last ended
//! (completed, or failed: a part that could not be written, or the checkpoint's timeout).
//! An instance that finished said so once ([`CheckpointPart`]'s `state.finished`): the
//! coordinator writes its part of every later checkpoint itself, since its thread or PE may be
//! gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sluice_checkpoint::{
    CheckpointKind, CheckpointStore, Manifest, PartEntry, StoreError, VerifiedCheckpoint,
};
use sluice_exec::checkpoint::{CheckpointPart, CheckpointSink};
use sluice_plan::PhysicalPlan;

use crate::{CheckpointOptions, CheckpointSummary, InstanceState, JobState, Restart, RunError};

/// What a process tells its coordinator of one instance's part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PartAck {
    /// The checkpoint (for a finished instance: the first it is finished for).
    pub n: u64,
    /// The instance's name in the store: `operator[index]`.
    pub part: String,
    /// What was written; `None` for an instance that finished (the coordinator writes its
    /// parts) or when the write failed.
    pub entry: Option<PartEntry>,
    /// Why the part could not be written.
    pub error: Option<String>,
    /// From the instance's first barrier to its last.
    pub alignment_ms: u64,
    /// Tuples it held back while aligning.
    pub held: u64,
}

/// The name of an instance's part: `operator[index]`, whatever its operator's parallelism.
fn part_name(operator: &str, instance: usize) -> String {
    format!("{operator}[{instance}]")
}

/// The operator and instance index a part name stands for.
fn parse_part_name(name: &str) -> Option<(&str, usize)> {
    let open = name.rfind('[')?;
    let index = name[open + 1..].strip_suffix(']')?.parse().ok()?;
    Some((&name[..open], index))
}

/// An instance's state as a part's payload.
fn encode(state: &InstanceState) -> Result<Vec<u8>, String> {
    postcard::to_allocvec(state).map_err(|e| format!("cannot encode an instance's state: {e}"))
}

/// Hands each part to a thread of its own that writes it to the store and acknowledges it:
/// the data path only sends on a channel.
pub(crate) struct PartWriter {
    /// The channel to the writer's thread, until [`PartWriter::finish`] closes it.
    parts: Mutex<Option<crossbeam_channel::Sender<CheckpointPart>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl PartWriter {
    /// A writer into `store`, telling `acknowledge` of each part.
    pub(crate) fn start(
        store: Arc<CheckpointStore>,
        acknowledge: impl Fn(PartAck) + Send + 'static,
    ) -> Result<Arc<Self>, RunError> {
        let (parts, taken) = crossbeam_channel::unbounded::<CheckpointPart>();
        let thread = std::thread::Builder::new()
            .name("checkpoint-writer".into())
            .spawn(move || {
                for part in taken {
                    acknowledge(write_part(&store, part));
                }
            })
            .map_err(|source| RunError::Spawn {
                thread: "checkpoint-writer".into(),
                source,
            })?;
        Ok(Arc::new(Self {
            parts: Mutex::new(Some(parts)),
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Once the job's threads have ended: waits until every part handed over is written and
    /// acknowledged (a PE's acknowledgements go before its report).
    pub(crate) fn finish(&self) {
        drop(lock(&self.parts).take());
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CheckpointSink for PartWriter {
    fn part(&self, part: CheckpointPart) {
        if let Some(parts) = lock(&self.parts).as_ref() {
            // The writer's thread reads until the channel is closed: a send cannot fail.
            let _ = parts.send(part);
        }
    }
}

/// Writes one part (unless it says its instance finished) and says how it went.
fn write_part(store: &CheckpointStore, part: CheckpointPart) -> PartAck {
    let name = part_name(&part.operator, part.instance);
    let mut ack = PartAck {
        n: part.n,
        part: name,
        entry: None,
        error: None,
        alignment_ms: part.alignment.as_millis() as u64,
        held: part.held,
    };
    if part.state.finished {
        return ack;
    }
    let n = part.n;
    // The snapshot an operator left for later is made here, off the data path.
    let state = part.into_state().map_err(|e| e.to_string());
    match state.and_then(|state| encode(&state)).and_then(|payload| {
        store
            .write_part(n, &ack.part, &payload)
            .map_err(|e| e.to_string())
    }) {
        Ok(info) => ack.entry = Some(info.entry),
        Err(error) => ack.error = Some(error),
    }
    ack
}

/// What the coordinator asks of the job's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Take checkpoint n.
    Take(u64),
    /// Checkpoint n is complete.
    Complete(u64),
}

/// A savepoint asked for: where to keep it, and who waits for the answer.
struct SavepointAsk {
    target: PathBuf,
    reply: crossbeam_channel::Sender<Result<PathBuf, String>>,
}

/// A handle on a checkpointed job's checkpoints, for other threads while it runs: what they
/// did so far, and savepoints on demand.
#[derive(Clone, Default)]
pub struct CheckpointHandle(Arc<Shared>);

#[derive(Default)]
struct Shared {
    summary: Mutex<CheckpointSummary>,
    asks: Mutex<Vec<SavepointAsk>>,
}

impl CheckpointHandle {
    /// What the job's checkpoints and restarts did so far.
    pub fn summary(&self) -> CheckpointSummary {
        lock(&self.0.summary).clone()
    }

    /// Takes a checkpoint now (after the one in flight, if any) and keeps it as a savepoint
    /// in `target`, a directory that must not exist yet; waits for it at most `wait`.
    /// Returns the savepoint's directory.
    pub fn savepoint(&self, target: &Path, wait: Duration) -> Result<PathBuf, String> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        lock(&self.0.asks).push(SavepointAsk {
            target: target.to_path_buf(),
            reply,
        });
        answer.recv_timeout(wait).map_err(|_| {
            format!(
                "no checkpoint completed within {} s to keep as a savepoint",
                wait.as_secs()
            )
        })?
    }
}

/// The checkpoint in flight.
struct InFlight {
    n: u64,
    asked: Instant,
    asked_unix_ms: u64,
    /// Each instance's part written, by part name.
    entries: BTreeMap<String, PartEntry>,
    alignment_ms: u64,
    /// Why a part failed.
    failed: Option<String>,
    /// Savepoints waiting for it.
    savepoints: Vec<SavepointAsk>,
}

/// Asks for checkpoints, counts their parts, writes their manifests.
pub(crate) struct Coordinator {
    store: Arc<CheckpointStore>,
    options: CheckpointOptions,
    /// The parts each checkpoint needs, one per instance of the plan.
    parts: Vec<String>,
    /// Instances that finished, from which checkpoint on.
    finished: BTreeMap<String, u64>,
    job: String,
    application: String,
    plan: String,
    next: u64,
    due: Instant,
    in_flight: Option<InFlight>,
    pub(crate) stats: CheckpointSummary,
    /// Where the stats are published, and savepoints asked for.
    pub(crate) handle: CheckpointHandle,
}

impl Coordinator {
    /// A coordinator for `plan`, whose first checkpoint is numbered `first`.
    pub(crate) fn new(
        store: Arc<CheckpointStore>,
        options: CheckpointOptions,
        plan: &PhysicalPlan,
        job: &str,
        first: u64,
    ) -> Self {
        let parts = plan
            .instances
            .iter()
            .map(|i| part_name(sluice_exec::operator_of(i), i.index))
            .collect();
        Self {
            store,
            options,
            parts,
            finished: BTreeMap::new(),
            job: job.to_string(),
            application: plan.job.clone(),
            plan: format!(
                "{} instance(s) on {} thread(s) in {} PE(s)",
                plan.instances.len(),
                plan.threads().count(),
                plan.pes.len()
            ),
            next: first.max(1),
            due: Instant::now() + options.every,
            in_flight: None,
            stats: CheckpointSummary::default(),
            handle: CheckpointHandle::default(),
        }
    }

    /// Takes in one instance's part.
    pub(crate) fn acknowledge(&mut self, ack: PartAck) {
        if ack.entry.is_none() && ack.error.is_none() {
            self.finished.entry(ack.part).or_insert(ack.n);
            return;
        }
        let Some(flight) = self.in_flight.as_mut().filter(|f| f.n == ack.n) else {
            return;
        };
        flight.alignment_ms = flight.alignment_ms.max(ack.alignment_ms);
        match (ack.entry, ack.error) {
            (Some(entry), _) => {
                flight.entries.insert(ack.part, entry);
            }
            (None, Some(error)) => {
                flight
                    .failed
                    .get_or_insert(format!("part {}: {error}", ack.part));
            }
            (None, None) => {}
        }
    }

    /// The job is restarting (`restart` says when, from where, why): the checkpoint in
    /// flight will not complete (its instances are gone).
    pub(crate) fn restarted(&mut self, restart: Restart) {
        self.stats.restarts.push(restart);
        if let Some(flight) = self.in_flight.take() {
            self.failed(flight, "the job failed before it completed".into());
        }
        self.publish();
    }

    /// The restarted job runs again, every instance restored: the next checkpoint is asked
    /// for `every` from now. Counted from the restart, it was due as the job began to
    /// replay when its restart took longer than `every` (a large state's does), and its
    /// copy of the state just restored, encoded and written beside the replay, held the job
    /// below its rate for a second or more.
    pub(crate) fn runs_again(&mut self) {
        self.due = Instant::now() + self.options.every;
    }

    /// Checkpoint `flight` failed because of `why`: what it wrote goes, the savepoints that
    /// waited for it are told.
    fn failed(&mut self, flight: InFlight, why: String) {
        let n = flight.n;
        let _ = self.store.abort(n);
        self.stats.failed += 1;
        self.stats.last_failure = Some(format!("checkpoint {n}: {why}"));
        tracing::warn!("checkpoint {n} failed: {why}");
        for ask in flight.savepoints {
            let _ = ask.reply.send(Err(format!("checkpoint {n} failed: {why}")));
        }
        self.publish();
    }

    /// Publishes the stats on the handle.
    fn publish(&self) {
        *lock(&self.handle.0.summary) = self.stats.clone();
    }

    /// What to tell the job now: complete the checkpoint in flight when every part is in,
    /// fail it past its timeout, ask for the next when it is due.
    pub(crate) fn tick(&mut self) -> Vec<Order> {
        let mut orders = Vec::new();
        if let Some(n) = self.settle() {
            orders.push(Order::Complete(n));
        }
        let asks = std::mem::take(&mut *lock(&self.handle.0.asks));
        if !asks.is_empty() && self.in_flight.is_none() {
            self.due = Instant::now();
        }
        if self.in_flight.is_none() && Instant::now() >= self.due {
            let n = self.next;
            self.next += 1;
            self.in_flight = Some(InFlight {
                n,
                asked: Instant::now(),
                asked_unix_ms: unix_ms(),
                entries: BTreeMap::new(),
                alignment_ms: 0,
                failed: None,
                savepoints: Vec::new(),
            });
            orders.push(Order::Take(n));
        }
        // A savepoint asked for while a checkpoint is in flight waits for the next one: the
        // one in flight may have begun before the ask.
        match self.in_flight.as_mut() {
            Some(flight) if orders.contains(&Order::Take(flight.n)) => {
                flight.savepoints.extend(asks)
            }
            _ => lock(&self.handle.0.asks).extend(asks),
        }
        orders
    }

    /// Ends the checkpoint in flight if it can: its number if it completed.
    fn settle(&mut self) -> Option<u64> {
        let flight = self.in_flight.as_ref()?;
        let n = flight.n;
        let finished_before = |part: &String| self.finished.get(part).is_some_and(|&f| f <= n);
        let missing = self
            .parts
            .iter()
            .filter(|p| !flight.entries.contains_key(*p) && !finished_before(p))
            .count();
        let timed_out = flight.asked.elapsed() >= self.options.timeout;
        let outcome = match (&flight.failed, missing, timed_out) {
            (Some(why), _, _) => Err(why.clone()),
            (None, 0, _) => self.complete(),
            (None, _, true) => Err(format!(
                "{missing} instance(s) had not taken their part after {} s",
                self.options.timeout.as_secs()
            )),
            (None, _, false) => return None,
        };
        let flight = self.in_flight.take()?;
        self.due = Instant::now() + self.options.every;
        match outcome {
            Ok(()) => {
                for ask in flight.savepoints {
                    let kept = self
                        .store
                        .save_as(n, &ask.target)
                        .map_err(|e| e.to_string());
                    let _ = ask.reply.send(kept);
                }
                self.publish();
                Some(n)
            }
            Err(why) => {
                self.failed(flight, why);
                None
            }
        }
    }

    /// Writes the parts of the instances that finished and the manifest of the checkpoint in
    /// flight, every part being in.
    fn complete(&mut self) -> Result<(), String> {
        let Some(flight) = self.in_flight.as_mut() else {
            return Ok(());
        };
        let finished = encode(&InstanceState {
            finished: true,
            ..InstanceState::default()
        })?;
        for part in &self.parts {
            if !flight.entries.contains_key(part) {
                let info = self
                    .store
                    .write_part(flight.n, part, &finished)
                    .map_err(|e| e.to_string())?;
                flight.entries.insert(part.clone(), info.entry);
            }
        }
        let duration = flight.asked.elapsed();
        let manifest = Manifest {
            job: self.job.clone(),
            application: self.application.clone(),
            kind: CheckpointKind::Checkpoint,
            n: flight.n,
            created_unix_ms: flight.asked_unix_ms,
            duration_ms: duration.as_millis() as u64,
            alignment_ms: flight.alignment_ms,
            plan: self.plan.clone(),
            parts: flight.entries.values().cloned().collect(),
        };
        self.store
            .complete(flight.n, &manifest)
            .map_err(|e| e.to_string())?;
        self.stats.completed += 1;
        self.stats.last = Some(flight.n);
        self.stats.last_duration = duration;
        self.stats.last_bytes = manifest.parts.iter().map(|p| p.bytes).sum();
        self.stats.last_alignment = Duration::from_millis(flight.alignment_ms);
        Ok(())
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A complete checkpoint (or savepoint) a job starts from, its parts left on disk: where each
/// instance's part is, by operator, each operator's instances in order. The launcher sends
/// each PE only the entries of its part ([`StoredCheckpoint::for_pe`]) and the PE reads them
/// itself ([`StoredCheckpoint::state`]): no state travels through the launcher or its control
/// streams, so a restart's cost does not grow with its messages, and the state's size has no
/// limit of theirs. On several hosts, the checkpoint directory is a shared mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    /// Its number.
    pub n: u64,
    /// Its directory.
    pub dir: PathBuf,
    /// Each operator's instances' parts, in order (`None`: a part left out).
    parts: BTreeMap<String, Vec<Option<PartEntry>>>,
}

impl StoredCheckpoint {
    /// The parts of a checkpoint that verified.
    fn new(verified: VerifiedCheckpoint) -> Result<Self, RunError> {
        let mut parts: BTreeMap<String, Vec<Option<PartEntry>>> = BTreeMap::new();
        for entry in verified.manifest.parts {
            let Some((operator, instance)) = parse_part_name(&entry.name) else {
                return Err(RunError::Launch(format!(
                    "checkpoint {} has a part named '{}', which names no instance",
                    verified.n, entry.name
                )));
            };
            let instances = parts.entry(operator.to_string()).or_default();
            instances.resize(instances.len().max(instance + 1), None);
            instances[instance] = Some(entry);
        }
        Ok(StoredCheckpoint {
            n: verified.n,
            dir: verified.dir,
            parts,
        })
    }

    /// The entries PE `pe` of `plan` reads its instances' state from (as
    /// [`JobState::for_pe`] deals a state in memory).
    pub(crate) fn for_pe(&self, plan: &PhysicalPlan, pe: usize) -> StoredCheckpoint {
        StoredCheckpoint {
            n: self.n,
            dir: self.dir.clone(),
            parts: sluice_exec::part_for_pe(&self.parts, plan, pe),
        }
    }

    /// The state its parts hold, each read from its file, verified and decoded.
    pub fn state(&self) -> Result<JobState, RunError> {
        let mut state = JobState::default();
        for (operator, entries) in &self.parts {
            let mut instances = Vec::with_capacity(entries.len());
            for entry in entries {
                instances.push(match entry {
                    Some(entry) => self.read(entry)?,
                    None => InstanceState::default(),
                });
            }
            state.operators.insert(operator.clone(), instances);
        }
        Ok(state)
    }

    fn read(&self, entry: &PartEntry) -> Result<InstanceState, RunError> {
        read_state(&self.dir, entry, &format!("checkpoint {}", self.n))
    }
}

/// The instance's state the part `entry` in `dir` holds, read, verified and decoded; `of`
/// names what the part belongs to in an error.
fn read_state(dir: &Path, entry: &PartEntry, of: &str) -> Result<InstanceState, RunError> {
    let payload = sluice_checkpoint::read_part(dir, entry)
        .map_err(|e| RunError::Launch(format!("cannot restore: {e}")))?;
    postcard::from_bytes(&payload).map_err(|e| {
        RunError::Launch(format!(
            "part '{}' of {of} does not decode: {e}",
            entry.name
        ))
    })
}

/// A suspended job's state on its way between processes of one host, as part files (a
/// checkpoint's format) in the launcher's private directory instead of inside the control
/// messages: each PE writes its instances' states when the job is suspended and reports where
/// they are, and a job resumed from a state has it written for its PEs to read, as a restart
/// reads a checkpoint. So the state's size has no limit of the messages' ([`MAX_LINE`]).
///
/// [`MAX_LINE`]: crate::wire::MAX_LINE
#[derive(Debug, Clone)]
pub(crate) struct StateFiles {
    store: CheckpointStore,
}

impl StateFiles {
    /// The one set of states a directory holds (a job is suspended once, and resumed once).
    const N: u64 = 1;

    /// The state files under `dir` (made if missing).
    pub(crate) fn open(dir: &Path) -> Result<Self, RunError> {
        CheckpointStore::open(dir)
            .map(|store| StateFiles { store })
            .map_err(|e| RunError::Launch(format!("cannot keep a suspended job's state: {e}")))
    }

    /// Writes the state of instance `index` of `operator`; returns where it is.
    pub(crate) fn write(
        &self,
        operator: &str,
        index: usize,
        state: &InstanceState,
    ) -> Result<PartEntry, RunError> {
        let failed = |e: String| {
            RunError::Launch(format!("cannot keep the state of {operator}[{index}]: {e}"))
        };
        let payload = encode(state).map_err(failed)?;
        self.store
            .write_part(Self::N, &part_name(operator, index), &payload)
            .map(|written| written.entry)
            .map_err(|e| failed(e.to_string()))
    }

    /// The state [`StateFiles::write`] wrote where `entry` says.
    pub(crate) fn read(&self, entry: &PartEntry) -> Result<InstanceState, RunError> {
        read_state(
            &self.store.checkpoint_dir(Self::N),
            entry,
            "a suspended job's state",
        )
    }

    /// Writes every instance's state of `state`: the checkpoint-like set of parts a job's PEs
    /// resume from, each reading its own.
    pub(crate) fn write_job(&self, state: &JobState) -> Result<StoredCheckpoint, RunError> {
        let mut parts = BTreeMap::new();
        for (operator, instances) in &state.operators {
            let entries = instances
                .iter()
                .enumerate()
                .map(|(index, s)| self.write(operator, index, s).map(Some))
                .collect::<Result<Vec<_>, _>>()?;
            parts.insert(operator.clone(), entries);
        }
        Ok(StoredCheckpoint {
            n: Self::N,
            dir: self.store.checkpoint_dir(Self::N),
            parts,
        })
    }
}

/// How much of a checkpoint is verified before a job restarts from it: one of
/// [`CheckpointStore::latest_complete`] (its parts' payloads are checksummed by the PEs that
/// read them) and [`CheckpointStore::latest_verified`] (every part read and checksummed).
pub(crate) type Verify = fn(&CheckpointStore) -> Result<Option<VerifiedCheckpoint>, StoreError>;

/// The last complete checkpoint of `store` that verifies as `verify` says (falling back past
/// corrupt ones, each named in the log); `None` when there is none.
pub(crate) fn latest_checkpoint(
    store: &CheckpointStore,
    verify: Verify,
) -> Result<Option<StoredCheckpoint>, RunError> {
    let refused = |e: StoreError| RunError::Launch(format!("cannot recover: {e}"));
    match verify(store).map_err(refused)? {
        Some(verified) => StoredCheckpoint::new(verified).map(Some),
        None => Ok(None),
    }
}

/// The checkpoint or savepoint a job starts from (`sluice run --from DIR`): `dir` is one
/// checkpoint's (or savepoint's) directory, or a job's checkpoint directory, whose latest
/// complete checkpoint is taken. Every part is verified; none is loaded.
pub fn load_checkpoint(dir: &Path) -> Result<StoredCheckpoint, RunError> {
    let verified = sluice_checkpoint::verify(dir).map_err(|e| RunError::Launch(e.to_string()))?;
    StoredCheckpoint::new(verified)
}

/// Opens the job's checkpoint store as `options` say.
pub(crate) fn open_store(options: &CheckpointOptions) -> Result<Arc<CheckpointStore>, RunError> {
    let retained =
        std::num::NonZeroUsize::new(options.retained.max(1)).unwrap_or(std::num::NonZeroUsize::MIN);
    CheckpointStore::open(options.dir)
        .map(|store| Arc::new(store.with_retained(retained)))
        .map_err(|e| RunError::Launch(format!("checkpoints: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_name_names_its_operator_and_instance() {
        assert_eq!(parse_part_name(&part_name("sum", 3)), Some(("sum", 3)));
        assert_eq!(
            parse_part_name(&part_name("odd[0]", 1)),
            Some(("odd[0]", 1))
        );
        assert_eq!(parse_part_name("sum"), None);
        assert_eq!(parse_part_name("sum[x]"), None);
    }

    /// After a restart that took longer than the checkpoint interval, the first checkpoint
    /// of the restored job is asked for an interval after it runs again, not at once.
    #[test]
    fn a_restored_job_takes_its_next_checkpoint_an_interval_after_it_runs_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(CheckpointStore::open(dir.path()).unwrap());
        let every = Duration::from_millis(300);
        let options = CheckpointOptions::new(every, Box::leak(dir.path().into()));
        let plan = PhysicalPlan {
            job: "job".into(),
            strategy: "fused".into(),
            pes: Vec::new(),
            instances: Vec::new(),
            edges: Vec::new(),
            channels: Vec::new(),
            hosts: Vec::new(),
            launcher: None,
        };
        let mut coordinator = Coordinator::new(store, options, &plan, "job", 1);
        coordinator.restarted(Restart {
            at: Duration::ZERO,
            from: None,
            cause: "a PE died".into(),
        });
        // The restart and the restore take longer than the interval.
        std::thread::sleep(every * 2);
        coordinator.runs_again();
        assert_eq!(coordinator.tick(), Vec::new());
    }

    /// A restart's start message names where each part is: its size does not grow with the
    /// state (which once travelled inside it, and past 64 MiB of JSON failed every restart),
    /// and the PE reads the state back whole from the files.
    #[test]
    fn a_restart_sends_where_the_state_is_not_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path()).unwrap();
        let state = InstanceState {
            snapshot: sluice_graph::Snapshot {
                operator: (0..4 << 20).map(|i| (i % 251) as u8).collect(),
                keyed: sluice_graph::KeyedEntries::default(),
            },
            finished: false,
            ..InstanceState::default()
        };
        let name = part_name("sum", 1);
        let entry = store
            .write_part(7, &name, &encode(&state).unwrap())
            .unwrap()
            .entry;
        let manifest = Manifest {
            job: "job".into(),
            application: "test".into(),
            kind: CheckpointKind::Checkpoint,
            n: 7,
            created_unix_ms: 0,
            duration_ms: 0,
            alignment_ms: 0,
            plan: "processes".into(),
            parts: vec![entry],
        };
        store.complete(7, &manifest).unwrap();

        let checkpoint = latest_checkpoint(&store, CheckpointStore::latest_verified)
            .unwrap()
            .unwrap();
        assert_eq!(checkpoint.n, 7);
        let message = crate::resume::PeResume::Checkpoint(checkpoint.clone());
        let mut line = Vec::new();
        crate::wire::send(&mut line, &message).unwrap();
        assert!(
            line.len() < 1024,
            "the start message carries {} bytes for a 4 MiB state",
            line.len()
        );
        let received: crate::resume::PeResume =
            crate::wire::receive(&mut line.as_slice()).unwrap().unwrap();
        let restored = received
            .into_state(&mut crate::wire::StateFrames::default())
            .unwrap();
        assert_eq!(restored.operators["sum"].len(), 2);
        assert_eq!(restored.operators["sum"][0], InstanceState::default());
        assert_eq!(restored.operators["sum"][1], state);
    }

    /// A message longer than a control stream carries is refused at the sender, naming both
    /// sizes, not cut off for the peer to misread.
    #[test]
    fn a_message_past_the_control_streams_limit_is_refused_naming_both_sizes() {
        let big = vec![b'x'; (crate::wire::MAX_LINE + 1) as usize];
        let text = String::from_utf8(big).unwrap();
        let mut line = Vec::new();
        let error = crate::wire::send(&mut line, &text).unwrap_err().to_string();
        assert!(line.is_empty());
        assert!(
            error.contains(&format!("{} bytes", text.len() + 3)),
            "{error}"
        );
        assert!(error.contains("64 MiB"), "{error}");
    }
}
