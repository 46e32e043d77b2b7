//! How to run a job: [`RunOptions`], one value for both planes. The data plane reads what its
//! threads need (the idle strategy, the poll batch, latency markers, profiling, the stall and
//! drain deadlines, metrics, whether the job may be suspended); the control plane
//! (`sluice-runtime`) reads the rest (where the PEs run, the duration, the start-up deadline,
//! the PEs' arguments). It is one struct, defined here on the lower side, so that programs set
//! every option of a run in one place and the data plane never depends on the control plane.

use std::time::Duration;

use sluice_sync::IdleStrategy;

/// Where the PEs of a plan run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Launcher {
    /// One OS process per PE on this host, children of this one (the program re-executes
    /// itself as each PE); a plan of one PE runs in this process.
    #[default]
    Local,
    /// Every PE as threads of this process; edges between PEs still use their transports.
    InProcess,
    /// Every PE as a rank of Open MPI's `mpirun`, on the hosts the plan placed it on.
    Mpi,
}

/// Tuples a source emits between latency markers unless [`RunOptions::latency_every`] says
/// otherwise: at 40,000 tuples/s, 600 samples a second, for a clock read per 64 tuples.
pub const DEFAULT_LATENCY_EVERY: u64 = 64;

/// How to run a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// How idle threads wait; by default chosen from the thread and core counts.
    pub idle: Option<IdleStrategy>,
    /// Stop (and drain) after this long; run until the sources end if `None`.
    pub duration: Option<Duration>,
    /// The most messages a receiver hands over per poll.
    pub poll_batch: usize,
    /// Where the PEs run.
    pub launcher: Launcher,
    /// Each source sends a latency marker after this many tuples (0: none). Markers travel
    /// in order with the data, each along one path: an instance passes a marker to one
    /// instance of each downstream operator (to all on a broadcast edge), as Flink's latency
    /// markers take one channel. Every instance a marker reaches records how long it took,
    /// and the sinks' figures are the job's end-to-end latency ([`crate::JobReport::latency`]).
    pub latency_every: u64,
    /// Estimate each instance's CPU time ([`crate::InstanceReport::cpu_ns`]) by timing a sample of
    /// every thread's rounds: what `sluice run --profile` records for the optimizers.
    pub profile_cpu: bool,
    /// A thread that makes no progress (a round of its loop, a batch, a wait on a full queue)
    /// or a PE that sends no heartbeat for this long fails the job, naming it.
    pub stall_timeout: Duration,
    /// A drain (after a stop) that has not ended this long after the stop aborts the job.
    pub drain_timeout: Duration,
    /// How long the PEs may take to start (each step of start-up: reaching the launcher,
    /// binding, starting), through their hosts' launch commands too.
    pub start_timeout: Duration,
    /// Whether the threads publish live metrics ([`crate::metrics`], `RunningJob::metrics`); on
    /// by default.
    pub metrics: bool,
    /// The arguments each PE's process is started with (after the program), when not this
    /// process's own: a program whose command line does not rebuild the graph (the query
    /// shell, where the statement was typed, not given) passes what does. The slice lives as
    /// long as the program (`Box::leak` it: a few hundred bytes per job), which keeps the
    /// options `Copy`.
    pub pe_args: Option<&'static [std::ffi::OsString]>,
    /// The program each PE's process runs (with its [`RunOptions::pe_args`]), when not this
    /// process's executable: a script names the interpreter it was started as (Python's
    /// `sys.executable`, a virtual environment's, where the executable the kernel knows is
    /// the interpreter it links to, outside the environment). Leaked as `pe_args` is.
    pub pe_program: Option<&'static std::path::Path>,
    /// The job may be suspended to be redeployed ([`crate::StopHandle::suspend`]): it fails at its
    /// start, naming the source, unless every source can resume where it stopped.
    pub suspendable: bool,
    /// Take checkpoints, and recover from the last one when a PE or thread fails (off by
    /// default). Every source must be able to resume where it stopped.
    pub checkpoints: Option<CheckpointOptions>,
    /// The most bytes (encoded tuples) the sinks of a job running in PE processes may return
    /// to the launching process (`collect()`); past it the job fails naming the limit.
    pub collect_limit: u64,
    /// The most polling workers (OS threads running the plan's threads) a process runs; `None`:
    /// the machine's cores. A process whose PEs have more threads than this runs them as tasks
    /// on this many workers, one pinned per core, which take turns without waiting on the
    /// kernel (`scheduler`'s module doc); with at most this many, each thread runs on its own.
    /// `sluice run --workers N`.
    pub workers: Option<usize>,
    /// Show the job's progress on standard error while it runs, in the launching process: a
    /// live line on a terminal, a `progress:` log event (`tracing`) every 10 s elsewhere. On
    /// by default; nothing to show with [`RunOptions::metrics`] off.
    pub progress: bool,
    /// The rate the job's sources were asked to run at, in tuples per second: the progress
    /// warns when they run more than 5% below it for 3 s (`sluice run --rate`).
    pub asked_rate: Option<u64>,
    /// Say on standard error, once a job stopped before its sources ended (a stop asked by the
    /// program, `sluice stop` or `POST /jobs/ID/stop`, not its duration), that its output is
    /// partial. On by default; `sluice run` says it itself, with more of the reason.
    pub partial_notice: bool,
}

/// How a job takes checkpoints and recovers from them ([`RunOptions::checkpoints`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointOptions {
    /// A checkpoint is asked for this long after the last one ended (or the job started).
    pub every: Duration,
    /// The job's checkpoint directory (a shared mount when its PEs run on several hosts).
    /// The slice lives as long as the program (`Box::leak` it), which keeps the options `Copy`.
    pub dir: &'static std::path::Path,
    /// Complete checkpoints kept; older ones are deleted.
    pub retained: usize,
    /// Times the job is restarted from its last complete checkpoint after a failure before
    /// it fails for good.
    pub restarts: u32,
    /// The wait before each restart.
    pub restart_delay: Duration,
    /// A checkpoint not complete this long after it was asked for fails, and the next is
    /// asked for.
    pub timeout: Duration,
    /// Unaligned checkpoints: an instance takes its state at the first barrier and keeps the
    /// tuples still in flight on its other inputs with it, instead of holding those inputs
    /// back until every barrier is in (for jobs under backpressure; see
    /// [`crate::checkpoint`]).
    pub unaligned: bool,
    /// An aligned checkpoint goes unaligned at an instance that would otherwise hold back
    /// more than this many tuples while it waits for its other inputs' barriers: the memory
    /// an alignment may take is bounded (see [`crate::checkpoint`]).
    pub align_limit: u64,
}

/// [`CheckpointOptions::retained`] unless set.
pub const DEFAULT_CHECKPOINTS_RETAINED: usize = 3;
/// [`CheckpointOptions::restarts`] unless set.
pub const DEFAULT_RESTARTS: u32 = 3;
/// [`CheckpointOptions::restart_delay`] unless set: long enough for what the failure left
/// (a port in TIME_WAIT, a segment being removed) to clear, short beside a second.
pub const DEFAULT_RESTART_DELAY: Duration = Duration::from_millis(100);
/// [`CheckpointOptions::align_limit`] unless set: some tens of megabytes of small tuples per
/// instance.
pub const DEFAULT_ALIGN_LIMIT: u64 = 1_000_000;
/// [`CheckpointOptions::timeout`] unless set.
pub const DEFAULT_CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(600);

impl CheckpointOptions {
    /// A checkpoint every `every` into `dir`, with the defaults for the rest.
    pub fn new(every: Duration, dir: &'static std::path::Path) -> Self {
        Self {
            every,
            dir,
            retained: DEFAULT_CHECKPOINTS_RETAINED,
            restarts: DEFAULT_RESTARTS,
            restart_delay: DEFAULT_RESTART_DELAY,
            timeout: DEFAULT_CHECKPOINT_TIMEOUT,
            unaligned: false,
            align_limit: DEFAULT_ALIGN_LIMIT,
        }
    }
}

/// [`RunOptions::stall_timeout`] unless set: far above any pause of a working thread (a
/// scheduling delay, a full queue is no pause: waiting on one counts as progress).
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// [`RunOptions::collect_limit`] unless set.
pub const DEFAULT_COLLECT_LIMIT: u64 = 256 << 20;
/// [`RunOptions::drain_timeout`] unless set.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// [`RunOptions::start_timeout`] unless set: room for `ssh` to log in and start a PE.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            idle: None,
            duration: None,
            poll_batch: 256,
            launcher: Launcher::Local,
            latency_every: DEFAULT_LATENCY_EVERY,
            profile_cpu: false,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            start_timeout: DEFAULT_START_TIMEOUT,
            metrics: true,
            pe_args: None,
            pe_program: None,
            suspendable: false,
            checkpoints: None,
            collect_limit: DEFAULT_COLLECT_LIMIT,
            workers: None,
            progress: true,
            asked_rate: None,
            partial_notice: true,
        }
    }
}
